// The git source a Flux-applied workload's checksum is committed to: the GitRepository of the
// Kustomization that applied it, at the Kustomization's path (docs/flux.md, "Git mode").
//
// Authority, as for Argo CD (service/gitops/authority.ts): the workload's
// kustomize.toolkit.fluxcd.io/name and /namespace labels only name a candidate, since its team can
// write any label. The Kustomization is used only when
//  1. it sits in one of --flux-namespaces (where the platform team keeps its Flux objects);
//  2. its status.inventory lists this exact workload (written by kustomize-controller alone);
//  3. its sourceRef is a GitRepository in the Kustomization's own namespace (the tenant edits its
//     spec.sourceRef: pointed at another team's GitRepository, it would choose that team's repository
//     and credentials), that follows a branch;
//  4. the inventory came from that source, at that path: the Kustomization is Ready, has observed
//     its current spec (status.observedGeneration = metadata.generation, so sourceRef and path are
//     the ones last applied), and applied the GitRepository's current artifact
//     (status.lastAppliedRevision = the GitRepository's status.artifact.revision);
//  5. its spec.targetNamespace, when set, is the workload's namespace (every object it applies is put
//     there); when not set, the manifest written must name the workload's namespace itself.
// (issue 35, finding 2)
// The repository URL is parsed once by service/core/repo-url.ts (the canonical identity Argo CD's
// git mode uses), and the credentials are chosen by the same rules (service/gitops/credentials.ts).
//
// Facts from the released sources: source-controller api v1.9.0 v1/gitrepository_types.go (ref:
// commit > name > semver > tag > branch, and branch defaults to `master`), kustomize-controller
// v1.9.0 (the inventory id `<namespace>_<name>_<group>_<kind>`, spec.path relative to the root).

import type { AppKey } from '../argocd/tracking.ts';
import { contactURL } from '../core/repo-url.ts';
import { type GitSource, GitSourceError, sourceRepo, why } from '../gitops/application.ts';
import type { WorkloadId } from '../gitops/authority.ts';
import { GitRefused } from '../gitops/refusal.ts';
import type { CustomApi } from '../kube/api.ts';

/** The labels kustomize-controller puts on what it applies: a claim, never proof. */
export const FLUX_OWNER_LABELS = {
  name: 'kustomize.toolkit.fluxcd.io/name',
  namespace: 'kustomize.toolkit.fluxcd.io/namespace',
} as const;

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;
const str = (v: unknown): string | undefined =>
  typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;

/** The Kustomization a workload's labels name, or undefined when they name none. */
export function fluxClaim(labels: Readonly<Record<string, string>>): AppKey | undefined {
  const name = labels[FLUX_OWNER_LABELS.name]?.trim();
  const namespace = labels[FLUX_OWNER_LABELS.namespace]?.trim();
  return name && namespace ? { namespace, name } : undefined;
}

/** kustomize-controller's inventory id of an object. */
export const inventoryId = (w: WorkloadId) => `${w.namespace}_${w.name}_${w.group}_${w.kind}`;

/** Whether the Kustomization's status.inventory lists the workload. */
export function inventoryLists(ks: unknown, w: WorkloadId): boolean {
  const entries = obj(obj(obj(ks)?.status)?.inventory)?.entries;
  if (!Array.isArray(entries)) return false;
  const id = inventoryId(w);
  return entries.some((e) => obj(e)?.id === id);
}

/** The branch a GitRepository follows, or a GitSourceError when it follows a tag, a commit or a ref. */
export function branchOf(gitRepository: unknown, name: string): string {
  const ref = obj(obj(obj(gitRepository)?.spec)?.ref) ?? {};
  const pinned = (what: string) =>
    new GitSourceError(
      `${name} follows ${what}, not a branch: a commit to a branch would never be reconciled, so the git strategy writes only to a GitRepository that follows a branch`,
    );
  if (str(ref.commit)) throw pinned(`commit ${str(ref.commit)}`);
  const refName = str(ref.name);
  if (refName) {
    const m = /^refs\/heads\/(.+)$/.exec(refName);
    if (!m) throw pinned(`the reference ${refName}`);
    return m[1] as string;
  }
  if (str(ref.semver)) throw pinned(`the semver range ${str(ref.semver)}`);
  if (str(ref.tag)) throw pinned(`the tag ${str(ref.tag)}`);
  // source-controller's default when no ref field is set.
  return str(ref.branch) ?? 'master';
}

/**
 * The Kustomization's spec.path as a path in the repository ('' for the root), or a GitSourceError for
 * one that leaves it. kustomize-controller reads `./apps/web`, `apps/web/` and `/apps/web` alike.
 */
export function repoPathOf(ks: unknown, name: string): string {
  const raw = str(obj(obj(ks)?.spec)?.path) ?? '';
  const segments = raw.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..') || raw.includes('\\')) {
    throw new GitSourceError(
      `${name} has a path with a .. segment or a backslash; the git strategy refuses it`,
    );
  }
  return segments.join('/');
}

/**
 * Rules 3 to 5 over the Kustomization and its GitRepository as read: a refusal when the inventory
 * cannot be shown to come from that source, at that path, into the workload's namespace. Pure.
 */
export function appliedFromSource(
  ks: unknown,
  gitRepository: unknown,
  key: AppKey,
  workload: WorkloadId,
): GitRefused | undefined {
  const name = `Kustomization ${key.namespace}/${key.name}`;
  const k = obj(ks);
  const status = obj(k?.status);
  const generation = obj(k?.metadata)?.generation;
  if (typeof generation !== 'number' || status?.observedGeneration !== generation) {
    return new GitRefused(
      'not-applied',
      `git write refused for ${name}: Flux has not applied its current spec yet (observedGeneration is not its generation), so its inventory may come from another source or path`,
    );
  }
  const conditions = Array.isArray(status?.conditions) ? status.conditions : [];
  const ready = conditions.map(obj).find((c) => c?.type === 'Ready');
  if (ready?.status !== 'True') {
    return new GitRefused(
      'not-applied',
      `git write refused for ${name}: it is not Ready, so its inventory may not come from its source`,
    );
  }
  const applied = str(status?.lastAppliedRevision);
  const artifact = str(obj(obj(obj(gitRepository)?.status)?.artifact)?.revision);
  if (applied === undefined || applied !== artifact) {
    return new GitRefused(
      'not-applied',
      `git write refused for ${name}: its last applied revision is not its GitRepository's current artifact`,
    );
  }
  const target = str(obj(k?.spec)?.targetNamespace);
  if (target !== undefined && target !== workload.namespace) {
    return new GitRefused(
      'not-managed',
      `git write refused for ${name}: its targetNamespace is not ${workload.namespace}`,
    );
  }
  return undefined;
}

/** The namespace the Kustomization puts every object it applies in, when it sets one. */
export const targetNamespaceOf = (ks: unknown): string | undefined =>
  str(obj(obj(ks)?.spec)?.targetNamespace);

/**
 * The git source of a Kustomization and the GitRepository it reads (objects as the API returns
 * them). Pure: the caller has checked the Kustomization's authority.
 */
export function fluxGitSourceOf(ks: unknown, gitRepository: unknown, key: AppKey): GitSource {
  const name = `Kustomization ${key.namespace}/${key.name}`;
  const sourceName = `the GitRepository of ${name}`;
  const rawURL = str(obj(obj(gitRepository)?.spec)?.url);
  if (!rawURL) throw new GitSourceError(`${sourceName} has no url`);
  const repo = sourceRepo(rawURL, name);
  return {
    syncedBy: 'Flux',
    app: key,
    // Argo CD's projects do not apply: only credentials every project may use are considered.
    project: '',
    repo,
    repoURL: contactURL(repo),
    targetRevision: branchOf(gitRepository, sourceName),
    path: repoPathOf(ks, name),
    // Without targetNamespace, Flux gives a manifest no namespace of the workload's (rule 5).
    ...(targetNamespaceOf(ks) === undefined ? { namespaceRequired: true } : {}),
  };
}

export interface FluxAuthorityOptions {
  /** --flux-namespaces: where the platform team keeps Kustomizations and their sources. */
  fluxNamespaces: readonly string[];
}

const RBAC_HINT =
  'grant the service get on kustomizations.kustomize.toolkit.fluxcd.io and gitrepositories.source.toolkit.fluxcd.io (docs/flux.md)';

/**
 * The git source of the Kustomization a workload's labels name, once that Kustomization provably
 * applied the workload. Throws GitRefused, before any clone, when it did not or cannot be read;
 * GitSourceError when it has no usable git source.
 */
export async function authorizedFluxGitSource(
  custom: CustomApi,
  ks: AppKey,
  workload: WorkloadId,
  o: FluxAuthorityOptions,
): Promise<GitSource> {
  const name = `Kustomization ${ks.namespace}/${ks.name}`;
  if (!o.fluxNamespaces.includes(ks.namespace)) {
    throw new GitRefused(
      'app-namespace',
      `git write refused for ${name}: the Kustomization named by the workload is in namespace ${ks.namespace}, which is not one of --flux-namespaces`,
    );
  }
  const raw = await read(custom, KUSTOMIZATIONS, ks.namespace, ks.name).catch((err: unknown) => {
    throw new GitRefused(
      'app-unreadable',
      `git write refused: cannot read ${name} (${why(err)}); ${RBAC_HINT}`,
    );
  });
  if (!inventoryLists(raw, workload)) {
    throw new GitRefused(
      'not-managed',
      `git write refused for ${name}: its inventory does not list ${workload.kind} ${workload.namespace}/${workload.name}`,
    );
  }
  const ref = obj(obj(obj(raw)?.spec)?.sourceRef) ?? {};
  const kind = str(ref.kind);
  if (kind !== 'GitRepository') {
    throw new GitSourceError(
      `${name} reads a ${kind ?? 'source of no kind'}, not a GitRepository; the git strategy needs a git source`,
    );
  }
  const sourceNamespace = str(ref.namespace) ?? ks.namespace;
  const sourceName = str(ref.name) ?? '';
  if (sourceNamespace !== ks.namespace) {
    throw new GitRefused(
      'source-namespace',
      `git write refused for ${name}: its sourceRef names a GitRepository in another namespace; the git strategy writes only to a GitRepository in the Kustomization's own namespace`,
    );
  }
  const repo = await read(custom, GIT_REPOSITORIES, sourceNamespace, sourceName).catch((err: unknown) => {
    throw new GitRefused(
      'app-unreadable',
      `git write refused for ${name}: cannot read its GitRepository (${why(err)}); ${RBAC_HINT}`,
    );
  });
  const refused = appliedFromSource(raw, repo, ks, workload);
  if (refused) throw refused;
  return fluxGitSourceOf(raw, repo, ks);
}

const KUSTOMIZATIONS = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations' };
const GIT_REPOSITORIES = { group: 'source.toolkit.fluxcd.io', version: 'v1', plural: 'gitrepositories' };

function read(
  custom: CustomApi,
  kind: { group: string; version: string; plural: string },
  namespace: string,
  name: string,
): Promise<unknown> {
  return custom.getNamespacedCustomObject({ ...kind, namespace, name });
}
