// An application that reads its config at start, without containers: while a ConfigMap key holds a
// bad value, the pods created in one namespace fail readiness; pods created before or after stay or
// become Ready. Two real parts do it:
// - a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, CEL, enforced by the API server) with
//   the ConfigMap as its parameter marks each labelled pod admitted while the key is bad with the
//   annotation kwok.gitops-reloader.io/unready;
// - kwok's pod-unready stage (test/cluster/kwok/stages.yaml) then runs such a pod without readiness.
// The value is read once, at the pod's admission, as an app reads its config once at start.
//
// An API server fault shapes this file (kubernetes/kubernetes#130887, fix proposed in #141015, open
// as of v1.36.3): the API server watches ConfigMaps for policy parameters with its shared informer,
// and stops that informer for good the first moment no binding uses a ConfigMap-parameter policy. From
// then on, until it restarts, parameters are frozen or missing. So one inert anchor policy and binding
// are created before any test's and never deleted; while they exist the informer is never stopped.
import {
  AdmissionregistrationV1Api,
  type V1ConfigMap,
  type V1Pod,
  type V1PodCondition,
} from '@kubernetes/client-node';
import type { Kube } from './kube.ts';
import { statusOf } from './status.ts';
import { pending, waitFor } from './wait-for.ts';

/** The annotation kwok's pod-unready stage reads. */
export const UNREADY = 'kwok.gitops-reloader.io/unready';
/** Marks the policy's own dry-run probe pods, which it marks unready whatever the config says. */
const PROBE = 'gitops-reloader.io/health-probe';

export interface ConfigHealth {
  /** The ConfigMap, in the namespace, that the app reads at start. It must exist. */
  config: string;
  key: string;
  /** The value that makes the app fail readiness; any other value (or no key) is healthy. */
  bad: string;
  /** Only pods carrying this label read the config. */
  podLabel: { key: string; value: string };
}

export interface AppHealth {
  /**
   * Waits until a pod admitted now sees the ConfigMap's current value (unready exactly when it is
   * bad). The API server reads parameters through its own watch, so right after a write to the
   * ConfigMap a pod may still be admitted against the old value; a test that writes the config and
   * then creates pods itself calls this between the two.
   */
  seesCurrentConfig(): Promise<void>;
  /** Deletes the policy and its binding (cluster-scoped, so a test must call it). */
  remove(): Promise<void>;
}

/** A CEL string literal: JSON's escapes are CEL's for these (\", \\, \n, \uXXXX). */
const cel = (s: string) => JSON.stringify(s);

/** The policy's name: policies are cluster-scoped, so it carries the namespace. */
export const policyName = (namespace: string, config: string) => `gr-health-${namespace}-${config}`;

/** The policy object: pure, so what the API server is given can be read in one place. */
export function healthPolicy(namespace: string, h: ConfigHealth) {
  const name = policyName(namespace, h.config);
  const isBad = `has(params.data) && ${cel(h.key)} in params.data && params.data[${cel(h.key)}] == ${cel(h.bad)}`;
  const isProbe = `has(object.metadata.labels) && ${cel(PROBE)} in object.metadata.labels`;
  return {
    policy: {
      metadata: { name },
      spec: {
        paramKind: { apiVersion: 'v1', kind: 'ConfigMap' },
        // A broken expression refuses the pod: a harness fault must fail the test, not pass silently.
        failurePolicy: 'Fail',
        reinvocationPolicy: 'Never',
        matchConstraints: {
          resourceRules: [
            { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] },
          ],
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
          objectSelector: { matchLabels: { [h.podLabel.key]: h.podLabel.value } },
        },
        matchConditions: [{ name: 'reads-a-bad-config', expression: `(${isProbe}) || (${isBad})` }],
        mutations: [
          {
            patchType: 'ApplyConfiguration',
            applyConfiguration: {
              expression: `Object{metadata: Object.metadata{annotations: {${cel(UNREADY)}: "true"}}}`,
            },
          },
        ],
      },
    },
    binding: {
      metadata: { name },
      spec: {
        policyName: name,
        // No namespace: the ConfigMap is looked up in the admitted pod's namespace. A missing
        // ConfigMap leaves pods alone (an app without the file is not this harness's concern).
        paramRef: { name: h.config, parameterNotFoundAction: 'Allow' },
      },
    },
  };
}

/** The anchor's name: one per cluster, shared by every test, never deleted (see the header). */
export const ANCHOR = 'gr-health-configmap-params-anchor';

/** Creates the anchor unless it exists. It matches nothing: no namespace carries its label. */
async function ensureAnchor(adm: AdmissionregistrationV1Api): Promise<void> {
  const exists = (err: unknown) => statusOf(err) === 409;
  await adm
    .createMutatingAdmissionPolicy({
      body: {
        metadata: { name: ANCHOR },
        spec: {
          paramKind: { apiVersion: 'v1', kind: 'ConfigMap' },
          failurePolicy: 'Ignore',
          reinvocationPolicy: 'Never',
          matchConstraints: {
            resourceRules: [
              { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] },
            ],
            namespaceSelector: { matchLabels: { [ANCHOR]: 'never' } },
          },
          matchConditions: [{ name: 'never', expression: 'false' }],
          mutations: [{ patchType: 'ApplyConfiguration', applyConfiguration: { expression: 'Object{}' } }],
        },
      },
    })
    .catch((err) => {
      if (!exists(err)) throw err;
    });
  await adm
    .createMutatingAdmissionPolicyBinding({
      body: {
        metadata: { name: ANCHOR },
        spec: { policyName: ANCHOR, paramRef: { name: ANCHOR, parameterNotFoundAction: 'Allow' } },
      },
    })
    .catch((err) => {
      if (!exists(err)) throw err;
    });
}

/** A pod that is never stored: created with dryRun, to see what admission would make of it. */
async function admitted(
  kube: Pick<Kube, 'core'>,
  namespace: string,
  labels: Record<string, string>,
): Promise<V1Pod> {
  return kube.core.createNamespacedPod({
    namespace,
    dryRun: 'All',
    body: {
      metadata: { generateName: 'health-probe-', labels },
      spec: { containers: [{ name: 'probe', image: 'registry.invalid/probe:1' }] },
    },
  });
}

const marked = (p: V1Pod) => p.metadata?.annotations?.[UNREADY] !== undefined;

/**
 * Makes the pods labelled `h.podLabel` in `namespace` read `h.config` at start: those admitted while
 * its `h.key` is `h.bad` never become Ready. Returns once the policy is in force.
 */
export async function readsConfigAtStart(
  kube: Pick<Kube, 'kc' | 'core'>,
  namespace: string,
  h: ConfigHealth,
): Promise<AppHealth> {
  const adm = kube.kc.makeApiClient(AdmissionregistrationV1Api);
  const { policy, binding } = healthPolicy(namespace, h);
  const name = policy.metadata.name;
  await ensureAnchor(adm);
  await adm.createMutatingAdmissionPolicy({ body: policy });
  await adm.createMutatingAdmissionPolicyBinding({ body: binding });
  const labels = { [h.podLabel.key]: h.podLabel.value };
  // Policies, bindings and parameters take effect asynchronously: wait until a probe pod is marked,
  // which needs all three (the probe is marked whatever the value, but only with the parameter found).
  await waitFor(
    async () => {
      const p = await admitted(kube, namespace, { ...labels, [PROBE]: 'true' });
      return marked(p) ? true : pending(p.metadata?.annotations ?? 'no annotations');
    },
    {
      describe: `the ${name} policy in force (if it never is while ${h.config} exists, the API server's ConfigMap parameter informer may be stopped, kubernetes#130887: restart the control plane)`,
      timeout: 30_000,
    },
  );
  const health: AppHealth = {
    async seesCurrentConfig() {
      await waitFor(
        async () => {
          const cm: V1ConfigMap = await kube.core.readNamespacedConfigMap({ name: h.config, namespace });
          const bad = cm.data?.[h.key] === h.bad;
          const p = await admitted(kube, namespace, labels);
          return marked(p) === bad ? true : pending({ value: cm.data?.[h.key], marked: marked(p) });
        },
        { describe: `pods admitted against the current ${h.config}`, timeout: 30_000 },
      );
    },
    async remove() {
      await adm.deleteMutatingAdmissionPolicyBinding({ name });
      await adm.deleteMutatingAdmissionPolicy({ name });
    },
  };
  await health.seesCurrentConfig();
  return health;
}

const condition = (p: V1Pod, type: string): V1PodCondition | undefined =>
  p.status?.conditions?.find((c) => c.type === type);

/**
 * Where kwok has taken a pod: 'waiting' (not yet started), 'ready', or 'unready' (Running, its
 * containers started, Ready False: what pod-unready leaves).
 */
export function health(p: V1Pod): 'waiting' | 'ready' | 'unready' {
  if (!p.status?.podIP || p.status.phase !== 'Running') return 'waiting';
  const ready = condition(p, 'Ready')?.status === 'True';
  if (ready) return 'ready';
  const started = (p.status.containerStatuses ?? []).every((c) => c.started && c.state?.running);
  return started && condition(p, 'Ready')?.status === 'False' ? 'unready' : 'waiting';
}

/** Waits until kwok has started `pod` and returns it with where it landed: Ready or not. */
export async function waitStarted(kube: Kube, namespace: string, pod: string): Promise<V1Pod> {
  return waitFor(
    async () => {
      const p = await kube.core.readNamespacedPod({ name: pod, namespace });
      return health(p) === 'waiting' ? pending(p.status ?? 'no status') : p;
    },
    { describe: `pod ${pod} started by kwok`, timeout: 30_000 },
  );
}

/** The live (not deleting) pods matching `labelSelector`, with where kwok has taken each. */
export async function podHealth(
  kube: Kube,
  namespace: string,
  labelSelector: string,
): Promise<{ name: string; health: ReturnType<typeof health> }[]> {
  const list = await kube.core.listNamespacedPod({ namespace, labelSelector });
  return list.items
    .filter((p) => !p.metadata?.deletionTimestamp)
    .map((p) => ({ name: p.metadata?.name ?? '', health: health(p) }));
}
