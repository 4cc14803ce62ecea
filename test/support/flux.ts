// The one harness for suites that run against the real Flux controllers started by test/cluster
// (see test/cluster/flux.ts): a GitRepository that reads a repository on the loopback git server,
// and Kustomizations that apply paths of it into the test's namespace. What Flux did is read from
// their status, never written by the test (but for the reconcile request a person's `flux reconcile`
// sends: the reconcile.fluxcd.io/requestedAt annotation).
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { inject, type TestContext } from 'vitest';
import { FLUX_WEBHOOK_PATH } from '../../service/flux/webhook.ts';
import type { FluxEndpoints } from '../cluster/flux.ts';
import type { GitRepo } from './argocd.ts';
import type { Kube } from './kube.ts';
import { hashKeyFile, type RunningService, serviceArgs, startService } from './service.ts';
import { pending, waitFor } from './wait-for.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    flux: FluxEndpoints | undefined;
  }
}

export function fluxEndpoints(): FluxEndpoints {
  const e = inject('flux');
  if (!e) {
    throw new Error(
      'this suite needs the real Flux controllers of test/cluster; the control plane in use has none (TEST_KUBECONFIG clusters are not supported by these suites)',
    );
  }
  return e;
}

const SOURCE = { group: 'source.toolkit.fluxcd.io', version: 'v1', plural: 'gitrepositories' };
const KUSTOMIZE = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations' };

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface KustomizationObject {
  metadata: { name: string; namespace: string; generation?: number };
  spec: Record<string, unknown>;
  status?: {
    conditions?: Condition[];
    lastAppliedRevision?: string;
    lastAttemptedRevision?: string;
    observedGeneration?: number;
    lastHandledReconcileAt?: string;
    inventory?: { entries?: Array<{ id: string; v: string }> };
  };
}

/** `main@sha1:<sha>`: how source-controller names a commit of a branch. */
export const revisionOf = (sha: string, branch = 'main') => `${branch}@sha1:${sha}`;

/** A GitRepository in the test's namespace that reads `repo` on the cluster's git server. */
export class FluxSource {
  readonly kube: Kube;
  readonly namespace: string;
  readonly name: string;

  private constructor(kube: Kube, namespace: string, name: string) {
    this.kube = kube;
    this.namespace = namespace;
    this.name = name;
  }

  static async create(kube: Kube, namespace: string, repo: GitRepo, name = 'repo'): Promise<FluxSource> {
    fluxEndpoints();
    await kube.custom.createNamespacedCustomObject({
      ...SOURCE,
      namespace,
      body: {
        apiVersion: 'source.toolkit.fluxcd.io/v1',
        kind: 'GitRepository',
        metadata: { name, namespace },
        // A long interval: the tests ask for each fetch (reconcile), so nothing runs between their steps.
        spec: { url: repo.url, ref: { branch: 'main' }, interval: '1h', timeout: '60s' },
      },
    });
    return new FluxSource(kube, namespace, name);
  }

  /** Asks source-controller to fetch now, as `flux reconcile source git` does. */
  async reconcile(): Promise<void> {
    await requestReconcile(this.kube, SOURCE, this.namespace, this.name);
  }

  async revision(): Promise<string | undefined> {
    const o = (await this.kube.custom.getNamespacedCustomObject({
      ...SOURCE,
      namespace: this.namespace,
      name: this.name,
    })) as { status?: { artifact?: { revision?: string } } };
    return o.status?.artifact?.revision;
  }

  /** Fetches now and waits until the artifact is at `sha`. */
  async fetched(sha: string): Promise<void> {
    await this.reconcile();
    await waitFor(
      async () => {
        const r = await this.revision();
        return r === revisionOf(sha) ? r : pending(r);
      },
      { describe: `GitRepository ${this.namespace}/${this.name} at ${sha}`, timeout: 60_000, interval: 200 },
    );
  }
}

async function requestReconcile(
  kube: Kube,
  coords: { group: string; version: string; plural: string },
  namespace: string,
  name: string,
): Promise<string> {
  const token = new Date().toISOString();
  await kube.custom.patchNamespacedCustomObject(
    {
      ...coords,
      namespace,
      name,
      body: { metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': token } } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  return token;
}

/**
 * One more reconciliation by a Flux controller, waited for: requests it as `flux reconcile` does
 * (reconcile.fluxcd.io/requestedAt) and waits until status.lastHandledReconcileAt names the request.
 * The controllers record it in the status patch at the end of the reconciliation that saw it, so
 * what that reconciliation found (a Ready condition, a drift) is in the status returned.
 */
export async function reconciled<T extends { status?: { lastHandledReconcileAt?: string } }>(
  kube: Kube,
  coords: { group: string; version: string; plural: string },
  namespace: string,
  name: string,
  timeout = 120_000,
): Promise<T> {
  const token = await requestReconcile(kube, coords, namespace, name);
  return waitFor(
    async () => {
      const o = (await kube.custom.getNamespacedCustomObject({ ...coords, namespace, name })) as T;
      return o.status?.lastHandledReconcileAt === token ? o : pending(o.status?.lastHandledReconcileAt);
    },
    {
      describe: `${coords.plural} ${namespace}/${name} reconciled at request ${token}`,
      timeout,
      interval: 200,
    },
  );
}

export interface KustomizationOptions {
  name: string;
  source: FluxSource;
  /** The path in the repository. */
  path: string;
  dependsOn?: string[];
  /** Health checks of everything applied (spec.wait). */
  wait?: boolean;
}

export class FluxKustomization {
  readonly kube: Kube;
  readonly namespace: string;
  readonly name: string;

  private constructor(kube: Kube, namespace: string, name: string) {
    this.kube = kube;
    this.namespace = namespace;
    this.name = name;
  }

  static async create(kube: Kube, o: KustomizationOptions): Promise<FluxKustomization> {
    const namespace = o.source.namespace;
    await kube.custom.createNamespacedCustomObject({
      ...KUSTOMIZE,
      namespace,
      body: {
        apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
        kind: 'Kustomization',
        metadata: { name: o.name, namespace },
        spec: {
          interval: '1h',
          sourceRef: { kind: 'GitRepository', name: o.source.name },
          path: o.path,
          prune: true,
          targetNamespace: namespace,
          timeout: '2m',
          ...(o.wait ? { wait: true } : {}),
          ...(o.dependsOn ? { dependsOn: o.dependsOn.map((name) => ({ name })) } : {}),
        },
      },
    });
    return new FluxKustomization(kube, namespace, o.name);
  }

  async read(): Promise<KustomizationObject> {
    return (await this.kube.custom.getNamespacedCustomObject({
      ...KUSTOMIZE,
      namespace: this.namespace,
      name: this.name,
    })) as KustomizationObject;
  }

  async reconcile(): Promise<void> {
    await requestReconcile(this.kube, KUSTOMIZE, this.namespace, this.name);
  }

  /** One more reconciliation, requested and waited for (see reconciled()). */
  async reconciled(timeout = 120_000): Promise<KustomizationObject> {
    return reconciled<KustomizationObject>(this.kube, KUSTOMIZE, this.namespace, this.name, timeout);
  }

  /** Waits until the Kustomization is Ready with `sha` applied. */
  async waitApplied(sha: string, timeout = 120_000): Promise<KustomizationObject> {
    return waitFor(
      async () => {
        const k = await this.read();
        const ready = k.status?.conditions?.find((c) => c.type === 'Ready');
        const done =
          ready?.status === 'True' &&
          k.status?.lastAppliedRevision === revisionOf(sha) &&
          k.status?.observedGeneration === k.metadata.generation;
        return done
          ? k
          : pending({
              ready,
              applied: k.status?.lastAppliedRevision,
              attempted: k.status?.lastAttemptedRevision,
            });
      },
      { describe: `Kustomization ${this.namespace}/${this.name} Ready at ${sha}`, timeout, interval: 200 },
    );
  }

  async delete(): Promise<void> {
    await this.kube.custom
      .deleteNamespacedCustomObject({ ...KUSTOMIZE, namespace: this.namespace, name: this.name })
      .catch(() => undefined);
  }
}

/** The service, as the Flux suites run it: the Flux watch over the test's namespace, no Argo CD. */
export async function startFluxReloader(
  namespace: string,
  extra: string[],
  o: { onTestFinished: TestContext['onTestFinished']; keyFile?: string },
): Promise<RunningService> {
  const svc = startService(
    serviceArgs(namespace, o.keyFile ?? (await hashKeyFile()), [
      `--flux-namespaces=${namespace}`,
      '--argocd-namespaces=',
      '--debounce=1s',
      '--max-debounce-wait=2s',
      ...extra,
    ]),
  );
  o.onTestFinished(() => svc.kill());
  await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
  return svc;
}

const NOTIFICATION = { group: 'notification.toolkit.fluxcd.io', version: 'v1beta3' };

/**
 * The Secret, Provider and Alert a platform team creates (docs/flux.md), pointed at the service at
 * `url`: notification-controller then posts the events of the namespace's Kustomizations there,
 * signed with `token`.
 */
export async function subscribe(
  kube: Kube,
  namespace: string,
  url: string,
  token: string,
  secret = 'gitops-reloader-flux',
): Promise<void> {
  await kube.core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: secret }, stringData: { token } },
  });
  await kube.custom.createNamespacedCustomObject({
    ...NOTIFICATION,
    plural: 'providers',
    namespace,
    body: {
      apiVersion: 'notification.toolkit.fluxcd.io/v1beta3',
      kind: 'Provider',
      metadata: { name: 'gitops-reloader', namespace },
      spec: { type: 'generic-hmac', address: `${url}${FLUX_WEBHOOK_PATH}`, secretRef: { name: secret } },
    },
  });
  await kube.custom.createNamespacedCustomObject({
    ...NOTIFICATION,
    plural: 'alerts',
    namespace,
    body: {
      apiVersion: 'notification.toolkit.fluxcd.io/v1beta3',
      kind: 'Alert',
      metadata: { name: 'gitops-reloader', namespace },
      spec: {
        providerRef: { name: 'gitops-reloader' },
        eventSeverity: 'info',
        eventSources: [{ kind: 'Kustomization', name: '*' }],
      },
    },
  });
}
