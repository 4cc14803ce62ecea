// The cluster the bench runs on: TEST_KUBECONFIG, or the local control plane (started if it is not
// running; never stopped: it is shared). The bench adds its own tainted kwok nodes, so its thousands
// of pods neither crowd nor land beside anyone else's, and removes them, with its namespaces, after.
import { hostname } from 'node:os';
import path from 'node:path';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  type V1Node,
  VersionApi,
} from '@kubernetes/client-node';
import { ensureBinaries } from '../test/cluster/build.ts';
import { modulesFor, status, up } from '../test/cluster/control-plane.ts';
import { clusterPaths } from '../test/cluster/paths.ts';
import { policyName } from '../test/support/app-health.ts';
import { ensureCrds, loadCrds } from '../test/support/crds.ts';
import { statusOf } from '../test/support/status.ts';
import { pending, waitFor } from '../test/support/wait-for.ts';
import { BENCH_LABEL, PROGRESSIVE_CONFIG } from './fixture.ts';

export const OWNER_ANNOTATION = 'gitops-reloader.io/bench-owner';
/** kwok's node stage gives every node room for this many pods. */
const PODS_PER_NODE = 250;

export interface Kube {
  kc: KubeConfig;
  kubeconfigPath: string;
  core: CoreV1Api;
  apps: AppsV1Api;
  custom: CustomObjectsApi;
  coordination: CoordinationV1Api;
}

export { statusOf };

/** Resolves the cluster, starting the local control plane when it is down. */
export async function connect(say: (msg: string) => void): Promise<Kube> {
  let file: string;
  if (process.env.TEST_KUBECONFIG) {
    file = path.resolve(process.env.TEST_KUBECONFIG);
    say(`using the cluster in TEST_KUBECONFIG=${file}`);
  } else {
    const paths = clusterPaths();
    const s = await status(paths);
    if (s.running) {
      say(`using the local control plane at ${s.state?.server}`);
    } else {
      say(`local control plane not running (${s.problems.join('; ')}); starting it`);
      // The bench measures gitops-reloader alone: no Argo CD processes competing for the cores.
      await ensureBinaries(paths, say, modulesFor({ argocd: false }));
      await up(paths, say, { argocd: false });
    }
    file = paths.kubeconfig;
  }
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return {
    kc,
    kubeconfigPath: file,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    coordination: kc.makeApiClient(CoordinationV1Api),
  };
}

export async function serverVersion(kube: Kube): Promise<string> {
  const v = await kube.kc.makeApiClient(VersionApi).getCode();
  return v.gitVersion;
}

/** Installs Argo CD's Application CRD when the cluster lacks it (the service watches Applications). */
export async function ensureApplicationCrd(kube: Kube): Promise<void> {
  const api = kube.kc.makeApiClient(ApiextensionsV1Api);
  const missing = [];
  for (const crd of await loadCrds()) {
    const name = crd.metadata?.name as string;
    if (name !== 'applications.argoproj.io') continue;
    try {
      await api.readCustomResourceDefinition({ name });
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
      missing.push(crd);
    }
  }
  if (missing.length > 0) await ensureCrds(kube.kc, missing);
}

export const owner = () => `${hostname()}:${process.pid}`;

function alive(ownerValue: string | undefined): boolean {
  if (!ownerValue) return false;
  const [host, pid] = ownerValue.split(':');
  if (host !== hostname()) return true; // someone else's machine: not ours to judge
  try {
    process.kill(Number(pid), 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Deletes the admission policy and binding that the progressive phase puts on a namespace's shared
 * ConfigMap (cluster-scoped: deleting the namespace leaves them). Never the harness's anchor.
 */
async function removeHealthPolicy(kube: Kube, namespace: string): Promise<void> {
  const adm = kube.kc.makeApiClient(AdmissionregistrationV1Api);
  const name = policyName(namespace, PROGRESSIVE_CONFIG);
  const gone = (err: unknown) => {
    if (statusOf(err) !== 404) throw err;
  };
  await adm.deleteMutatingAdmissionPolicyBinding({ name }).catch(gone);
  await adm.deleteMutatingAdmissionPolicy({ name }).catch(gone);
}

/** Deletes namespaces and nodes left by an earlier bench run on this host whose process is gone. */
export async function removeStale(kube: Kube, say: (msg: string) => void): Promise<void> {
  const ns = await kube.core.listNamespace({ labelSelector: BENCH_LABEL });
  const staleNs = ns.items.filter(
    (n) => !alive(n.metadata?.annotations?.[OWNER_ANNOTATION]) && !n.metadata?.deletionTimestamp,
  );
  for (const n of staleNs) {
    await kube.core.deleteNamespace({ name: n.metadata?.name as string });
    await removeHealthPolicy(kube, n.metadata?.name as string);
  }
  const nodes = await kube.core.listNode({ labelSelector: BENCH_LABEL });
  const staleNodes = nodes.items.filter((n) => !alive(n.metadata?.annotations?.[OWNER_ANNOTATION]));
  for (const n of staleNodes) {
    await kube.core.deleteNode({ name: n.metadata?.name as string }).catch((err: unknown) => {
      if (statusOf(err) !== 404) throw err;
    });
  }
  if (staleNs.length + staleNodes.length > 0) {
    say(`removed ${staleNs.length} namespaces and ${staleNodes.length} nodes left by an earlier bench run`);
  }
}

export function nodesFor(pods: number): number {
  // Headroom for surge pods and rollouts in flight.
  return Math.max(1, Math.ceil((pods * 1.15 + 30) / PODS_PER_NODE));
}

/** `prefix` names a later batch of nodes (a phase's own), apart from the fixture's `node-<i>`. */
export async function createNodes(
  kube: Kube,
  run: string,
  count: number,
  prefix = 'node',
): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `grb-${run}-${prefix}-${i}`);
  for (const name of names) {
    const node: V1Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        annotations: {
          'kwok.x-k8s.io/node': 'fake',
          'node.alpha.kubernetes.io/ttl': '0',
          [OWNER_ANNOTATION]: owner(),
        },
        labels: {
          'kubernetes.io/hostname': name,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          type: 'kwok',
          [BENCH_LABEL]: run,
        },
      },
      spec: { taints: [{ key: BENCH_LABEL, value: run, effect: 'NoSchedule' }] },
    };
    await kube.core.createNode({ body: node });
  }
  await waitFor(
    async () => {
      const list = await kube.core.listNode({ labelSelector: `${BENCH_LABEL}=${run}` });
      const ready = list.items.filter(
        (n) =>
          names.includes(n.metadata?.name as string) &&
          n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
      return ready.length === count ? ready : pending(`${ready.length}/${count} bench nodes Ready`);
    },
    { describe: `${count} bench kwok nodes Ready`, timeout: 120_000, interval: 500 },
  );
  return names;
}

export async function createNamespaces(kube: Kube, run: string, names: string[]): Promise<void> {
  for (const name of names) {
    await kube.core.createNamespace({
      body: {
        metadata: { name, labels: { [BENCH_LABEL]: run }, annotations: { [OWNER_ANNOTATION]: owner() } },
      },
    });
  }
}

/** Deletes the run's namespaces and waits for them to go, then its nodes. */
export async function cleanUp(
  kube: Kube,
  run: string,
  say: (msg: string) => void,
  timeoutMs: number,
): Promise<{ seconds: number; complete: boolean }> {
  const t0 = Date.now();
  const selector = `${BENCH_LABEL}=${run}`;
  const list = await kube.core.listNamespace({ labelSelector: selector });
  for (const n of list.items) {
    await removeHealthPolicy(kube, n.metadata?.name as string);
    if (n.metadata?.deletionTimestamp) continue;
    await kube.core.deleteNamespace({ name: n.metadata?.name as string }).catch((err: unknown) => {
      if (statusOf(err) !== 404) throw err;
    });
  }
  let complete = true;
  try {
    await waitFor(
      async () => {
        const left = await kube.core.listNamespace({ labelSelector: selector });
        return left.items.length === 0 ? true : pending(`${left.items.length} namespaces still terminating`);
      },
      { describe: 'the bench namespaces to be deleted', timeout: timeoutMs, interval: 2000 },
    );
  } catch (err) {
    complete = false;
    say(`cleanup: ${(err as Error).message}; deleting the nodes anyway (pod GC removes what is left)`);
  }
  const nodes = await kube.core.listNode({ labelSelector: selector });
  for (const n of nodes.items) {
    await kube.core.deleteNode({ name: n.metadata?.name as string }).catch((err: unknown) => {
      if (statusOf(err) !== 404) throw err;
    });
  }
  return { seconds: (Date.now() - t0) / 1000, complete };
}
