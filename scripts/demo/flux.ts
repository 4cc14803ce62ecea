// The story's engine for `npm run demo -- --flux`: a GitRepository that reads the app's repository and
// a Kustomization that applies apps/web into the app's namespace, both in flux-system. Their interval
// is long: the demo asks for each fetch, as `flux reconcile source git` does.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { onCleanUp } from './cleanup.ts';
import type { Engine } from './engine.ts';
import { goDurationMs } from './go-duration.ts';
import { short } from './output.ts';
import { APP_NAMESPACE } from './pods.ts';
import { until } from './wait.ts';

const SOURCE = { group: 'source.toolkit.fluxcd.io', version: 'v1', plural: 'gitrepositories' };
const KUSTOMIZE = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations' };
const NAME = 'shop';

/** `main@sha1:<sha>`: how source-controller names a commit of a branch. */
const revisionOf = (sha: string) => `main@sha1:${sha}`;

interface Kustomization {
  metadata: { generation?: number };
  status?: {
    conditions?: Array<{ type: string; status: string }>;
    lastAppliedRevision?: string;
    observedGeneration?: number;
    lastHandledReconcileAt?: string;
    /** Newest first; one entry per revision and outcome (fluxcd/pkg apis/meta History). */
    history?: Array<{
      lastReconciled?: string;
      lastReconciledDuration?: string;
      metadata?: { revision?: string };
    }>;
  };
}

/** An ISO time to whole seconds, as Argo CD and the API server write them. */
const toSecond = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

export const fluxEngine: Engine = {
  name: 'Flux',
  environment:
    'control plane and Flux (real kube-apiserver, etcd, controllers, Flux source- and kustomize-controller v1.9; kwok plays the nodes)',
  needs: {},
  words: {
    deployIt: 'apply it',
    appliesIt: 'applies it',
    heldUntil: 'changes held until Flux applied them',
    oneChange: 'Flux revision',
  },
  open(state, { core, custom }) {
    const flux = state.flux;
    if (!flux) throw new Error('Flux did not start');
    const namespace = flux.namespace;
    const sourceRef = { ...SOURCE, namespace, name: NAME };
    const kustomizationRef = { ...KUSTOMIZE, namespace, name: NAME };
    const requestReconcile = (ref: typeof sourceRef, at: string) =>
      custom.patchNamespacedCustomObject(
        { ...ref, body: { metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': at } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const gone = (ref: typeof sourceRef) =>
      custom.getNamespacedCustomObject(ref).then(
        () => undefined,
        (e: { code?: number }) => (e.code === 404 ? true : undefined),
      );
    /** The Kustomization once it is Ready with `sha` applied and its history records that apply. */
    const appliedAt = (sha: string, also: (k: Kustomization) => boolean = () => true) =>
      until(
        `Flux to apply ${short(sha)} (Kustomization ${namespace}/${NAME} Ready)`,
        async () => {
          const k = (await custom.getNamespacedCustomObject(kustomizationRef)) as Kustomization;
          const s = k.status;
          const done =
            s?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') &&
            s.lastAppliedRevision === revisionOf(sha) &&
            s.observedGeneration === k.metadata.generation &&
            s.history?.[0]?.metadata?.revision === revisionOf(sha) &&
            also(k);
          return done ? k : undefined;
        },
        120_000,
      );

    return {
      serviceFlags: [`--flux-namespaces=${namespace}`, '--argocd-namespaces='],
      async clearLeftovers() {
        for (const ref of [kustomizationRef, sourceRef]) {
          await custom.deleteNamespacedCustomObject(ref).catch(() => undefined);
          // Their finalizers run first (the Kustomization prunes what it applied).
          await until(`${ref.plural} ${namespace}/${NAME} from an earlier run to be gone`, () => gone(ref));
        }
      },
      async deploy(repoUrl, sha) {
        const existed = await core.readNamespace({ name: namespace }).then(
          () => true,
          (e: { code?: number }) => {
            if (e.code === 404) return false;
            throw e;
          },
        );
        if (!existed) {
          await core.createNamespace({ body: { metadata: { name: namespace } } });
          onCleanUp(() => core.deleteNamespace({ name: namespace }));
        }
        // app.yaml names no namespace and Flux creates none for targetNamespace (Argo CD's
        // CreateNamespace=true does): the demo creates it.
        await core.createNamespace({ body: { metadata: { name: APP_NAMESPACE } } });
        onCleanUp(() => core.deleteNamespace({ name: APP_NAMESPACE }));
        await custom.createNamespacedCustomObject({
          ...SOURCE,
          namespace,
          body: {
            apiVersion: 'source.toolkit.fluxcd.io/v1',
            kind: 'GitRepository',
            metadata: { name: NAME, namespace },
            spec: { url: repoUrl, ref: { branch: 'main' }, interval: '1h', timeout: '60s' },
          },
        });
        onCleanUp(() => custom.deleteNamespacedCustomObject(sourceRef));
        await custom.createNamespacedCustomObject({
          ...KUSTOMIZE,
          namespace,
          body: {
            apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
            kind: 'Kustomization',
            metadata: { name: NAME, namespace },
            spec: {
              interval: '1h',
              sourceRef: { kind: 'GitRepository', name: NAME },
              path: './apps/web',
              prune: true,
              targetNamespace: APP_NAMESPACE,
              // Ready then also means what it applied is healthy, as Argo CD's Healthy does.
              wait: true,
              timeout: '2m',
            },
          },
        });
        onCleanUp(() => custom.deleteNamespacedCustomObject(kustomizationRef));
        await appliedAt(sha);
        return `Flux applied ${short(sha)}: Ready`;
      },
      async apply(sha) {
        await requestReconcile(sourceRef, new Date().toISOString());
        const k = await appliedAt(sha);
        const last = k.status?.history?.[0];
        // Its history has the end (to the second) and the duration: the start is the difference.
        const end = Date.parse(last?.lastReconciled ?? '');
        const took = goDurationMs(last?.lastReconciledDuration ?? '');
        const start = Number.isNaN(took) ? '?' : toSecond(end - took);
        return `Kustomization reconciliation ${start} → ${last?.lastReconciled}: Ready`;
      },
      async settled(sha) {
        const at = new Date().toISOString();
        await requestReconcile(kustomizationRef, at);
        await appliedAt(sha, (k) => k.status?.lastHandledReconcileAt === at);
        return 'Ready';
      },
    };
  },
};
