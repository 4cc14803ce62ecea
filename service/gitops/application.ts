// The git source a workload's checksum is committed to, read from the Argo CD Application that
// tracks the workload: repoURL, the branch (targetRevision), the path, and for Helm the values file.
// `gitSourceOf` is pure; `readGitSource` reads the Application from the API server at write time, so
// a changed Application is honoured without waiting for a watch.

import type { AppKey } from '../argocd/tracking.ts';
import {
  contactURL,
  hasURLScheme,
  isOciReference,
  parseRepoURL,
  type RepoIdentity,
  RepoURLError,
} from '../core/repo-url.ts';
import type { CustomApi } from '../kube/api.ts';
import {
  type Authority,
  appManages,
  appNamespaceAllowed,
  projectAllows,
  type WorkloadId,
} from './authority.ts';
import { GitRefused } from './refusal.ts';

export interface GitSource {
  /** Who syncs the repository: Argo CD (an Application) or Flux (a Kustomization's GitRepository). */
  syncedBy: 'Argo CD' | 'Flux';
  /** The Application (or, synced by Flux, the Kustomization) whose source this is. */
  app: AppKey;
  /** spec.project: selects project-scoped Argo CD repository Secrets. */
  project: string;
  /** The repository, parsed once: every check and the writer use this identity. */
  repo: RepoIdentity;
  /** contactURL(repo): the canonical spelling git is given, never the Application's raw string. */
  repoURL: string;
  /** spec.source.targetRevision; 'HEAD' (the remote's default branch) when unset. */
  targetRevision: string;
  /** The source path in the repository ('' for the root). */
  path: string;
  /** Helm: the values file to edit, relative to `path`: the last of helm.valueFiles (the one that wins). */
  valuesFile?: string;
  /**
   * A manifest is the workload only when it names the workload's namespace itself: nothing else gives
   * it one (a Flux Kustomization without targetNamespace).
   */
  namespaceRequired?: boolean;
}

/** The Application cannot give the git strategy a source to write to; the message says why. */
export class GitSourceError extends Error {
  override name = 'GitSourceError';
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** A source Argo CD renders manifests from, out of git: not a Helm-repository chart, not OCI, not values-only. */
function rendersFromGit(s: Obj): boolean {
  const repoURL = str(s.repoURL) ?? '';
  if (str(s.chart) || isOciReference(repoURL)) return false;
  // A `ref` source without a path only lends files ($ref/values.yaml) to another source.
  return str(s.path) !== undefined || str(s.ref) === undefined;
}

function describe(s: Obj): string {
  const chart = str(s.chart);
  const repo = str(s.repoURL) ?? '?';
  if (chart) return `the chart ${chart} from the Helm repository ${repo}`;
  if (isOciReference(repo)) return `the OCI artifact ${repo}`;
  return `${repo} (ref ${str(s.ref)}, no path)`;
}

/**
 * The repository of `owner`'s source (an Application, a Kustomization's GitRepository), parsed once.
 * A URL service/core/repo-url.ts refuses throws GitRefused (rule repo-url) without repeating it: the
 * Event goes to the workload's namespace, and the source may be another team's.
 */
export function sourceRepo(rawURL: string, owner: string): RepoIdentity {
  try {
    return parseRepoURL(rawURL);
  } catch (err) {
    if (!(err instanceof RepoURLError)) throw err;
    throw new GitRefused(
      'repo-url',
      `git write refused for ${owner}: its repository URL is refused because ${err.message}; nothing was sent to it`,
    );
  }
}

/**
 * The git source of an Application object (as the API returns it). With `spec.sources` (which wins
 * over `spec.source`, as in Argo CD) exactly one source may render from git. Throws GitSourceError
 * with a reason a person can act on, or GitRefused (rule repo-url) for a repository URL that
 * service/core/repo-url.ts refuses.
 */
export function gitSourceOf(raw: unknown, app: AppKey): GitSource {
  const name = `Application ${app.namespace}/${app.name}`;
  const spec = obj(obj(raw)?.spec);
  if (!spec) throw new GitSourceError(`${name} has no spec`);
  const multi = Array.isArray(spec.sources) ? spec.sources.map(obj).filter((s) => s !== undefined) : [];
  const single = obj(spec.source);
  const all = multi.length > 0 ? multi : single ? [single] : [];
  if (all.length === 0) throw new GitSourceError(`${name} has no source`);
  const git = all.filter(rendersFromGit);
  if (git.length === 0) {
    throw new GitSourceError(
      `${name} renders ${all.map(describe).join(' and ')}, not a git directory; the git strategy needs a git source`,
    );
  }
  if (git.length > 1) {
    throw new GitSourceError(
      `${name} has ${git.length} git sources (${git.map((s) => `${str(s.repoURL)} ${str(s.path) ?? ''}`.trim()).join(', ')}); the git strategy writes to an Application with one`,
    );
  }
  const s = git[0] as Obj;
  const rawURL = (str(s.repoURL) ?? '').trim();
  if (rawURL === '') throw new GitSourceError(`${name} has a source without repoURL`);
  const repo = sourceRepo(rawURL, name);
  const valueFiles = obj(s.helm)?.valueFiles;
  const last = Array.isArray(valueFiles) ? str(valueFiles[valueFiles.length - 1]) : undefined;
  if (last !== undefined && (last.startsWith('$') || hasURLScheme(last))) {
    throw new GitSourceError(
      `${name}: its last Helm values file ${JSON.stringify(last)} is not in the source's own repository path; the git strategy edits only a values file there`,
    );
  }
  return {
    syncedBy: 'Argo CD',
    app,
    project: str(spec.project) ?? 'default',
    repo,
    repoURL: contactURL(repo),
    targetRevision: str(s.targetRevision)?.trim() || 'HEAD',
    path: (str(s.path) ?? '').replace(/^\.\/?$/, ''),
    ...(last !== undefined ? { valuesFile: last } : {}),
  };
}

/** Reads the Application and returns its git source, without asking whether it may be used (tests, tools). */
export async function readGitSource(custom: CustomApi, app: AppKey): Promise<GitSource> {
  let raw: unknown;
  try {
    raw = await custom.getNamespacedCustomObject({
      group: 'argoproj.io',
      version: 'v1alpha1',
      namespace: app.namespace,
      plural: 'applications',
      name: app.name,
    });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 404) throw new GitSourceError(`Application ${app.namespace}/${app.name} does not exist`);
    throw new Error(
      `cannot read Application ${app.namespace}/${app.name}: ${typeof code === 'number' ? `HTTP ${code}` : (err as Error).message}`,
    );
  }
  return gitSourceOf(raw, app);
}

export interface AuthorityOptions {
  /** --argocd-namespaces: where Argo CD serves Applications from; the first is its own (AppProjects live there). */
  argocdNamespaces: readonly string[];
}

const RBAC_HINT =
  'grant the service get on applications and appprojects.argoproj.io (docs/security.md, "RBAC per feature")';

function refuse(a: Authority, app: AppKey): void {
  if (!a.ok)
    throw new GitRefused(
      a.rule,
      `git write refused for Application ${app.namespace}/${app.name}: ${a.message}`,
    );
}

/**
 * The git source of the Application named by a workload, once the Application provably manages the
 * workload (service/gitops/authority.ts). Throws GitRefused, before any clone, when it does not or
 * cannot be read; GitSourceError when it has no usable git source.
 */
export async function authorizedGitSource(
  custom: CustomApi,
  app: AppKey,
  workload: WorkloadId,
  o: AuthorityOptions,
): Promise<GitSource> {
  refuse(appNamespaceAllowed(app.namespace, o.argocdNamespaces), app);
  const controlNamespace = o.argocdNamespaces[0] ?? 'argocd';
  const raw = await readObject(custom, 'applications', app.namespace, app.name).catch((err: unknown) => {
    throw new GitRefused(
      'app-unreadable',
      `git write refused: cannot read Application ${app.namespace}/${app.name} (${why(err)}); ${RBAC_HINT}`,
    );
  });
  refuse(appManages(raw, workload), app);
  const source = gitSourceOf(raw, app);
  const project = await readObject(custom, 'appprojects', controlNamespace, source.project).catch(
    (err: unknown) => {
      throw new GitRefused(
        'project-unreadable',
        `git write refused for Application ${app.namespace}/${app.name}: cannot read its AppProject (${why(err)}); ${RBAC_HINT}`,
      );
    },
  );
  refuse(
    projectAllows(project, {
      appNamespace: app.namespace,
      controlNamespace,
      app: raw,
      workloadNamespace: workload.namespace,
      repo: source.repo,
    }),
    app,
  );
  return source;
}

/** Why an object could not be read, in a few words (no response body: it may name other objects). */
export function why(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (code === 404) return 'not found';
  if (code === 403) return 'forbidden';
  return typeof code === 'number' ? `HTTP ${code}` : (err as Error).message;
}

function readObject(custom: CustomApi, plural: string, namespace: string, name: string): Promise<unknown> {
  return custom.getNamespacedCustomObject({
    group: 'argoproj.io',
    version: 'v1alpha1',
    namespace,
    plural,
    name,
  });
}
