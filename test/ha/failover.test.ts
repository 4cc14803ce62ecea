// Two replicas as the chart runs them, and a leader that dies (SIGKILL) or is cut off from the API
// server (a partition at its proxy) at a random point of each multi-workload reload: every reload
// completes, no pod is recycled twice for one change, the ledger ends with an entry per workload and
// nothing pending, and no replica writes while another holds the Lease. Prints the fault table.
import { Watch } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { decodeEntry } from '../../service/core/ledger-entry.ts';
import { it, type Kube } from '../support/kube.ts';
import { waitReadyPods } from '../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  nonLeaderWrites,
  type Replica,
  startReplica,
  stoppedAfterEach,
  waitForLeader,
} from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment, isReady } from '../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();

const WORKLOADS = ['w0', 'w1', 'w2', 'w3'];
const ROUNDS = 5; // 5 changes × 4 workloads = 20 reloads
const EXTRA = [...FAST_LEASE, '--debounce=0s', '--min-reload-interval=0s'];

interface PodLife {
  app: string;
  uid: string;
  createdAt: number;
  deletedAt?: number;
  surge: boolean;
}

/** Every pod of the namespace, when the watch first saw it and when it started going away. */
async function podHistory(kube: Kube, namespace: string) {
  const pods = new Map<string, PodLife>();
  const record = (type: string, p: import('@kubernetes/client-node').V1Pod) => {
    const uid = p.metadata?.uid ?? '';
    let life = pods.get(uid);
    if (!life) {
      life = {
        app: p.metadata?.labels?.app ?? '',
        uid,
        createdAt: Date.now(),
        surge: p.metadata?.labels?.['gitops-reloader.io/surge'] !== undefined,
      };
      pods.set(uid, life);
    }
    if ((p.metadata?.deletionTimestamp || type === 'DELETED') && life.deletedAt === undefined)
      life.deletedAt = Date.now();
  };
  const list = await kube.core.listNamespacedPod({ namespace });
  for (const p of list.items) record('ADDED', p);
  const abort = await new Watch(kube.kc).watch(
    `/api/v1/namespaces/${namespace}/pods`,
    { resourceVersion: list.metadata?.resourceVersion },
    record,
    () => {},
  );
  return { pods, stop: () => abort.abort() };
}

async function livePods(kube: Kube, namespace: string, app: string) {
  return (await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items.filter(
    (p) => !p.metadata?.deletionTimestamp,
  );
}

describe('failover during reloads', () => {
  it('completes 20 reloads once each while the leader is killed or partitioned at random points', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '0' }) });
    for (const w of WORKLOADS) {
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(w, {
          replicas: 2,
          maxUnavailable: 1,
          maxSurge: 0,
          annotations: { 'reloader.stakater.com/auto': 'true' },
          podAnnotations: { 'kwok.gitops-reloader.io/ready-after': '1s' },
          container: { envFrom: [{ configMapRef: { name: 'app' } }] },
        }),
      });
    }
    for (const w of WORKLOADS) await waitReadyPods(kube, namespace, w, 2);
    const release = await installRelease(namespace, { watch: [namespace], extraArgs: EXTRA });
    releases.push(release);
    const start = async (identity: string) => {
      const r = await startReplica(kube, release, identity);
      replicas.push(r);
      await r.svc.waitForLog(`${identity} synced`, (l) => l.msg === 'caches synced', 60_000);
      return r;
    };
    const live: Replica[] = [await start('replica-a'), await start('replica-b')];
    let generation = 0;
    const history = await podHistory(kube, namespace);

    const rounds: Array<{ change: number; fault: string; afterDeletions: number; startedAt: number }> = [];
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        const leader = await waitForLeader(live, 60_000);
        const before = new Map<string, Set<string>>();
        for (const w of WORKLOADS)
          before.set(w, new Set((await livePods(kube, namespace, w)).map((p) => p.metadata?.uid ?? '')));
        const startedAt = Date.now();
        await kube.core.replaceNamespacedConfigMap({
          name: 'app',
          namespace,
          body: configMap('app', { k: String(round) }),
        });

        // A random point of the reload: after 0 to 7 of its 8 pod replacements began.
        const afterDeletions = Math.floor(Math.random() * WORKLOADS.length * 2);
        await waitFor(
          () => {
            const n = [...history.pods.values()].filter(
              (p) => !p.surge && p.deletedAt !== undefined && p.deletedAt >= startedAt,
            ).length;
            return n >= afterDeletions ? n : pending(n);
          },
          { describe: `${afterDeletions} pods on their way out`, timeout: 60_000 },
        );
        const fault = round % 2 === 1 ? 'SIGKILL' : 'partition';
        rounds.push({ change: round, fault, afterDeletions, startedAt });
        if (fault === 'SIGKILL') await leader.svc.kill();
        else leader.proxy.cut();

        // Every workload's pods are all new and Ready: the change reached all of them.
        for (const w of WORKLOADS) {
          const old = before.get(w) as Set<string>;
          await waitFor(
            async () => {
              const pods = await livePods(kube, namespace, w);
              const done =
                pods.length === 2 && pods.every((p) => isReady(p) && !old.has(p.metadata?.uid ?? ''));
              return done ? true : pending(pods.map((p) => `${p.metadata?.name} ready=${isReady(p)}`));
            },
            { describe: `round ${round}: every pod of ${w} replaced`, timeout: 90_000 },
          );
        }
        // The failed replica comes back as a pod would: killed → a new process; partitioned → healed.
        const i = live.indexOf(leader);
        if (fault === 'SIGKILL') live[i] = await start(`replica-${++generation}-restarted`);
        else leader.proxy.heal();
      }
      await waitForLeader(live, 60_000);
    } finally {
      history.stop();
    }

    // Double recycles: a pod created for a change that went away again before the next change.
    let doubleRecycles = 0;
    for (let r = 0; r < rounds.length; r++) {
      const from = (rounds[r] as (typeof rounds)[number]).startedAt;
      const to = rounds[r + 1]?.startedAt ?? Date.now();
      for (const p of history.pods.values()) {
        if (p.surge || !WORKLOADS.includes(p.app)) continue;
        if (p.createdAt > from && p.deletedAt !== undefined && p.deletedAt < to) doubleRecycles++;
      }
    }
    // Lost changes: a workload whose ledger entry is missing or still pending once the last leader has
    // had the time to resume what the last fault cut (its pods are all new: it only records that).
    const unsettled = async () => {
      const shards = await kube.core.listNamespacedConfigMap({
        namespace,
        labelSelector: 'app.kubernetes.io/component=ledger',
      });
      const entries = new Map<string, { pending: boolean }>();
      for (const cm of shards.items) {
        for (const [k, v] of Object.entries(cm.data ?? {})) {
          const d = decodeEntry(k, v);
          if (d.ok) entries.set(d.id, { pending: d.entry.pending !== undefined });
        }
      }
      return WORKLOADS.filter((w) => {
        const e = entries.get(`Deployment/${namespace}/${w}`);
        return !e || e.pending;
      });
    };
    const lost = await waitFor(
      async () => {
        const left = await unsettled();
        return left.length === 0 ? left : pending(left);
      },
      { describe: 'every ledger entry recorded, nothing pending', timeout: 60_000 },
    ).catch(() => unsettled());
    const writes = nonLeaderWrites(replicas);
    const table = {
      faultsInjected: rounds.length,
      kills: rounds.filter((r) => r.fault === 'SIGKILL').length,
      partitions: rounds.filter((r) => r.fault === 'partition').length,
      reloadsCompleted: rounds.length * WORKLOADS.length,
      doubleRecycles,
      lostChanges: lost.length,
      nonLeaderWrites: writes.length,
      faultPoints: rounds.map((r) => `${r.fault}@${r.afterDeletions}`),
    };
    console.log(`fault table: ${JSON.stringify(table)}`);
    expect(doubleRecycles).toBe(0);
    expect(lost).toEqual([]);
    expect(writes).toEqual([]);
  }, 600_000);
});
