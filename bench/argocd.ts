// Plays Argo CD's part in a sync, as far as gitops-reloader can see it: the Application's operation
// and status.operationState go Running, the synced resources change, then the phase goes Succeeded
// with syncResult.resources. (Our test Application CRD has no status subresource: Argo CD writes
// status with a plain update.)
import type { Kube } from './cluster.ts';
import { statusOf } from './cluster.ts';
import type { ConfigName } from './fixture.ts';

const GVP = { group: 'argoproj.io', version: 'v1alpha1', plural: 'applications' };
const REPO = 'http://127.0.0.1:1/config.git';

type App = Record<string, unknown> & { metadata: Record<string, unknown>; status?: Record<string, unknown> };

const rfc3339 = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

export function application(name: string, namespace: string, destination: string): App {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Application',
    metadata: { name, namespace },
    spec: {
      project: 'default',
      source: { repoURL: REPO, path: name, targetRevision: 'main' },
      destination: { server: 'https://kubernetes.default.svc', namespace: destination },
    },
  };
}

export async function createApplication(kube: Kube, app: App): Promise<void> {
  await kube.custom.createNamespacedCustomObject({
    ...GVP,
    namespace: app.metadata.namespace as string,
    body: app,
  });
}

async function writeStatus(
  kube: Kube,
  namespace: string,
  name: string,
  change: (app: App) => void,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const app = (await kube.custom.getNamespacedCustomObject({ ...GVP, namespace, name })) as App;
    change(app);
    try {
      await kube.custom.replaceNamespacedCustomObject({ ...GVP, namespace, name, body: app });
      return;
    } catch (err) {
      if (statusOf(err) !== 409 || attempt >= 5) throw err;
    }
  }
}

const operation = (revision: string) => ({
  sync: { revision, syncStrategy: { hook: {} } },
  initiatedBy: { automated: true },
});

export interface Sync {
  namespace: string;
  name: string;
  revision: string;
  startedAt: string;
}

/** Writes Running, as the application controller does when it picks up a sync. */
export async function startSync(kube: Kube, namespace: string, name: string): Promise<Sync> {
  const revision = `rev-${Date.now()}`;
  const startedAt = rfc3339(Date.now());
  await writeStatus(kube, namespace, name, (app) => {
    app.operation = operation(revision);
    app.status = {
      ...app.status,
      operationState: {
        operation: operation(revision),
        phase: 'Running',
        message: 'one or more tasks are running',
        startedAt,
      },
    };
  });
  return { namespace, name, revision, startedAt };
}

/** Writes Succeeded with the synced resources, and clears `operation`. */
export async function finishSync(kube: Kube, s: Sync, resources: ConfigName[]): Promise<void> {
  const finishedAt = rfc3339(Math.max(Date.now(), Date.parse(s.startedAt)));
  await writeStatus(kube, s.namespace, s.name, (app) => {
    delete app.operation;
    app.status = {
      ...app.status,
      operationState: {
        operation: operation(s.revision),
        phase: 'Succeeded',
        message: 'successfully synced (all tasks run)',
        startedAt: s.startedAt,
        finishedAt,
        syncResult: {
          revision: s.revision,
          source: { repoURL: REPO, path: s.name, targetRevision: 'main' },
          resources: resources.map((r) => ({
            group: '',
            version: 'v1',
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
            status: 'Synced',
            message: `${r.kind.toLowerCase()}/${r.name} serverside-applied`,
            syncPhase: 'Sync',
          })),
        },
      },
    };
  });
}
