// The app's pods as the demo shows them: which are Ready, which are the service's surge pods, and
// the live count while the old ones are replaced.
import type { CoreV1Api } from '@kubernetes/client-node';
import { say } from './output.ts';
import { until } from './wait.ts';

export const APP_NAMESPACE = 'demo-shop';

export interface PodLine {
  uid: string;
  name: string;
  ready: boolean;
  surge: boolean;
}

export async function pods(core: CoreV1Api): Promise<PodLine[]> {
  const list = await core.listNamespacedPod({ namespace: APP_NAMESPACE, labelSelector: 'app=web' });
  return list.items
    .filter((p) => !p.metadata?.deletionTimestamp)
    .map((p) => ({
      uid: p.metadata?.uid ?? '',
      name: p.metadata?.name ?? '',
      ready: Boolean(p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
      surge: p.metadata?.labels?.['gitops-reloader.io/surge'] !== undefined,
    }));
}

export const readyPods = (core: CoreV1Api) =>
  until('3 Ready pods', async () => {
    const p = await pods(core);
    return p.length === 3 && p.every((x) => x.ready) ? p : undefined;
  });

/** Prints a line each time the counts change, until every pod of `before` is replaced and 3 new are Ready. */
export async function showReplacement(core: CoreV1Api, before: readonly PodLine[], sinceMs: number) {
  let last = '';
  const old = new Set(before.map((p) => p.uid));
  await until(
    'every pod replaced',
    async () => {
      const p = await pods(core);
      const line = `    t+${((Date.now() - sinceMs) / 1000).toFixed(1).padStart(4)}s  Ready ${p.filter((x) => x.ready).length} (want ≥3)  old ${p.filter((x) => old.has(x.uid)).length}  new ${p.filter((x) => !old.has(x.uid) && !x.surge).length}  surge ${p.filter((x) => x.surge).length}`;
      const key = line.replace(/t\+\s*[\d.]+s/, '');
      if (key !== last) {
        say(line);
        last = key;
      }
      return p.length === 3 && p.every((x) => x.ready && !old.has(x.uid) && !x.surge) ? p : undefined;
    },
    120_000,
  );
}
