// The ledger against the real API server: what survives a restart, what each write costs, and that
// nothing is lost or corrupted when shards are shared, full, foreign or only pretended to (dry-run).
import type { KubeConfig } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { type LedgerEntry, ledgerKey, shardOf } from '../../service/core/ledger-entry.ts';
import type { ClusterAccess } from '../../service/kube/access.ts';
import { type CoreApi, coreApi } from '../../service/kube/api.ts';
import {
  FORMAT_ANNOTATION,
  LEDGER_LABELS,
  Ledger,
  LedgerError,
  LedgerFullError,
  type LedgerOptions,
} from '../../service/kube/ledger.ts';
import { it, type Kube } from '../support/kube.ts';

const T = '2026-12-02T14:39:22.310Z';
const digest = (n: number): string => n.toString(16).padStart(32, '0');

function entry(n: number, extra: Partial<LedgerEntry> = {}): LedgerEntry {
  return {
    configs: { 'ConfigMap/shop/web-config': digest(n), 'Secret/shop/web-secret': digest(n + 1) },
    ...extra,
  };
}

const pending = (n: number): LedgerEntry['pending'] => ({
  cutoff: T,
  target: { 'ConfigMap/shop/web-config': digest(n + 100) },
  changed: ['ConfigMap/shop/web-config'],
  startedAt: '2026-12-02T14:39:23.000Z',
});

interface Sent {
  method: string;
  path: string;
  contentType?: string;
}

/**
 * The service's CoreApi over an access that records every request it sends, read as `METHOD /path`
 * (plus the Content-Type of a PATCH): the access sees each request whole, just before it goes out.
 */
function countingCore(kc: KubeConfig): { core: CoreApi; requests: Requests } {
  const requests = new Requests();
  const access: ClusterAccess = {
    getCurrentCluster: () => kc.getCurrentCluster(),
    applyToHTTPSOptions: async (opts) => {
      const headers = (opts.headers ?? {}) as Record<string, string>;
      requests.sent.push({
        method: opts.method ?? 'GET',
        path: opts.path ?? '',
        contentType: headers['Content-Type'],
      });
      await kc.applyToHTTPSOptions(opts);
    },
  };
  return { core: coreApi(access), requests };
}

class Requests {
  sent: Sent[] = [];
  clear(): void {
    this.sent = [];
  }
  lines(): string[] {
    return this.sent.map((r) => {
      const type = r.method === 'PATCH' ? ` ${r.contentType}` : '';
      return `${r.method} ${new URL(r.path, 'http://x').pathname}${type}`;
    });
  }
}

interface LogLine {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

function ledger(kube: Kube, namespace: string, opts: Partial<LedgerOptions> = {}) {
  const { core, requests } = countingCore(kube.kc);
  const logs: LogLine[] = [];
  const l = new Ledger({
    core,
    namespace,
    log: (level, msg, fields) => logs.push({ level, msg, fields }),
    ...opts,
  });
  return { ledger: l, requests, logs };
}

async function shardMaps(kube: Kube, namespace: string) {
  const list = await kube.core.listNamespacedConfigMap({
    namespace,
    labelSelector: 'app.kubernetes.io/component=ledger',
  });
  return new Map(list.items.map((cm) => [cm.metadata?.name as string, cm]));
}

/** `count` workload ids that all land in the same shard of `shards`. */
function sameShardIds(count: number, shards: number): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < count; i++) {
    const id = `Deployment/shop/app-${i}`;
    if (shardOf(id, shards) === 0) ids.push(id);
  }
  return ids;
}

describe('the ledger', () => {
  it('keeps entries across a restart: what one instance puts, a fresh instance loads', async ({
    kube,
    namespace,
  }) => {
    const first = ledger(kube, namespace).ledger;
    expect(await first.load()).toEqual(new Map());
    await first.put('Deployment/shop/web', entry(1, { reloadedAt: T }));
    await first.put('StatefulSet/db/pg', entry(2, { pending: pending(2) }));

    const restarted = ledger(kube, namespace).ledger;
    const loaded = await restarted.load();
    expect(loaded).toEqual(
      new Map([
        ['Deployment/shop/web', entry(1, { reloadedAt: T })],
        ['StatefulSet/db/pg', entry(2, { pending: pending(2) })],
      ]),
    );
    expect(restarted.get('StatefulSet/db/pg')?.pending?.cutoff).toBe(T);

    // What a person sees with kubectl: labelled shards named by prefix, a readable key per workload.
    const shards = await shardMaps(kube, namespace);
    const home = shards.get(first.shardFor('Deployment/shop/web'));
    expect(home?.metadata?.labels).toMatchObject(LEDGER_LABELS);
    expect(home?.metadata?.annotations?.[FORMAT_ANNOTATION]).toBe('1');
    expect(home?.metadata?.name).toMatch(/^gitops-reloader-ledger-\d+$/);
    expect(Object.keys(home?.data ?? {})).toContain('Deployment_2Fshop_2Fweb');
  });

  it('removes an entry, and removing one that is not there sends nothing', async ({ kube, namespace }) => {
    const { ledger: l, requests } = ledger(kube, namespace);
    await l.load();
    await l.putMany([
      ['Deployment/shop/web', entry(1)],
      ['Deployment/shop/api', entry(2)],
    ]);
    await l.remove('Deployment/shop/web');
    expect(l.get('Deployment/shop/web')).toBeUndefined();

    const before = requests.sent.length;
    await l.remove('Deployment/shop/never-seen');
    expect(requests.lines().slice(before)).toEqual([]);

    const loaded = await ledger(kube, namespace).ledger.load();
    expect([...loaded.keys()]).toEqual(['Deployment/shop/api']);
  });

  it('writes a baseline of 1000 workloads with one request per shard, and nothing when unchanged', async ({
    kube,
    namespace,
  }) => {
    const { ledger: l, requests } = ledger(kube, namespace);
    await l.load();
    expect(requests.lines()).toEqual([`GET /api/v1/namespaces/${namespace}/configmaps`]);

    const baseline = Array.from({ length: 1000 }, (_, i): [string, LedgerEntry] => [
      `Deployment/team-${i % 40}/app-${i}`,
      entry(i),
    ]);
    requests.clear();
    await l.putMany(baseline);
    // 16 shards, none existing yet: one create each.
    expect(requests.lines()).toHaveLength(16);
    expect(requests.lines().every((r) => r.startsWith('POST '))).toBe(true);

    requests.clear();
    await l.putMany(baseline);
    expect(requests.lines()).toEqual([]);

    requests.clear();
    await l.putMany(baseline.map(([id], i): [string, LedgerEntry] => [id, entry(i, { reloadedAt: T })]));
    expect(requests.lines()).toHaveLength(16);
    expect(
      requests.lines().every((r) => r.startsWith('PATCH ') && r.endsWith(' application/merge-patch+json')),
    ).toBe(true);

    const loaded = await ledger(kube, namespace).ledger.load();
    expect(loaded.size).toBe(1000);
    expect(loaded.get('Deployment/team-7/app-7')).toEqual(entry(7, { reloadedAt: T }));
    const shards = await shardMaps(kube, namespace);
    expect(shards.size).toBe(16);
  });

  it('keeps both writes when two writers put different keys of the same shard', async ({
    kube,
    namespace,
  }) => {
    const [a, b, c] = sameShardIds(3, 16);
    const { ledger: one, requests: r1 } = ledger(kube, namespace);
    const { ledger: two, requests: r2 } = ledger(kube, namespace);
    await Promise.all([one.load(), two.load()]);
    r1.clear();
    r2.clear();
    // Neither has seen the shard: both try to create it at once, and one of them must fall back to a patch.
    await Promise.all([one.put(a!, entry(1)), two.put(b!, entry(2))]);
    const shard = `/api/v1/namespaces/${namespace}/configmaps`;
    expect([...r1.lines(), ...r2.lines()].sort()).toEqual([
      `PATCH ${shard}/gitops-reloader-ledger-0 application/merge-patch+json`,
      `POST ${shard}`,
      `POST ${shard}`,
    ]);
    // `one` has not loaded b; its merge patch must leave b alone.
    await one.put(c!, entry(3));
    await two.put(b!, entry(4));

    const loaded = await ledger(kube, namespace).ledger.load();
    expect(loaded).toEqual(
      new Map([
        [a!, entry(1)],
        [b!, entry(4)],
        [c!, entry(3)],
      ]),
    );
  });

  it('refuses a write that would take a shard over its budget, with a clear error, and keeps what it had', async ({
    kube,
    namespace,
  }) => {
    const ids = sameShardIds(20, 2);
    const { ledger: l } = ledger(kube, namespace, { shards: 2, shardBudgetBytes: 1000 });
    await l.load();
    let stored = 0;
    let full: unknown;
    for (const id of ids) {
      try {
        await l.put(id, entry(stored));
        stored++;
      } catch (err) {
        full = err;
        break;
      }
    }
    expect(stored).toBeGreaterThan(0);
    expect(full).toBeInstanceOf(LedgerFullError);
    const err = full as LedgerFullError;
    expect(err.shard).toBe('gitops-reloader-ledger-0');
    expect(err.workloads).toEqual([ids[stored]]);
    expect(err.bytes).toBeGreaterThan(1000);
    expect(err.message).toMatch(
      /ledger shard gitops-reloader-ledger-0 is full: writing Deployment\/shop\/app-\d+/,
    );
    expect(err.message).toMatch(/over its budget of 1000; nothing was written/);

    // A batch that overflows one shard writes to no shard at all.
    const other = `Deployment/other/${Array.from({ length: 50 }, (_, i) => `x${i}`).find((n) => shardOf(`Deployment/other/${n}`, 2) === 1)}`;
    await expect(
      l.putMany([[other, entry(1)], ...ids.slice(stored).map((id): [string, LedgerEntry] => [id, entry(9)])]),
    ).rejects.toThrow(LedgerFullError);

    const loaded = await ledger(kube, namespace, { shards: 2 }).ledger.load();
    expect(loaded.size).toBe(stored);
    expect(loaded.has(other)).toBe(false);
    for (const [i, id] of ids.slice(0, stored).entries()) expect(loaded.get(id)).toEqual(entry(i));

    // A full shard can still shrink.
    await l.remove(ids[0]!);
    expect((await ledger(kube, namespace, { shards: 2 }).ledger.load()).size).toBe(stored - 1);
  });

  it('in dry-run reads but creates and patches nothing, and logs each write it would make', async ({
    kube,
    namespace,
  }) => {
    const { ledger: l, requests, logs } = ledger(kube, namespace, { dryRun: true });
    await l.load();
    await l.putMany(
      Array.from({ length: 50 }, (_, i): [string, LedgerEntry] => [`Deployment/shop/app-${i}`, entry(i)]),
    );
    await l.put('Deployment/shop/web', entry(1, { pending: pending(1) }));
    await l.remove('Deployment/shop/app-0');

    expect(requests.lines().every((r) => r.startsWith('GET '))).toBe(true);
    expect(await shardMaps(kube, namespace)).toEqual(new Map());
    const all = await kube.core.listNamespacedConfigMap({ namespace });
    expect(all.items.map((cm) => cm.metadata?.name).filter((n) => n?.includes('ledger'))).toEqual([]);

    const wouldWrite = logs.filter((line) => line.msg === 'ledger dry-run: would write shard');
    expect(wouldWrite.length).toBeGreaterThanOrEqual(3);
    const web = wouldWrite.find((line) =>
      (line.fields.workloads as string[]).includes('Deployment/shop/web'),
    );
    expect(web?.fields.shard).toBe(l.shardFor('Deployment/shop/web'));
    const data = (web?.fields.data ?? {}) as Record<string, string>;
    expect(data[ledgerKey('Deployment/shop/web')]).toContain(T);
    // In memory, the dry run behaves as if it had written.
    expect(l.get('Deployment/shop/web')?.pending?.cutoff).toBe(T);
    expect(l.get('Deployment/shop/app-0')).toBeUndefined();
  });

  it('reports and skips a corrupt or foreign value, and leaves it in place', async ({ kube, namespace }) => {
    const good = 'Deployment/shop/web';
    await kube.core.createNamespacedConfigMap({
      namespace,
      body: {
        metadata: { name: 'gitops-reloader-ledger-0', labels: { ...LEDGER_LABELS } },
        data: {
          [ledgerKey(good)]: '{"c":{"ConfigMap/shop/web-config":"abc"}}',
          [ledgerKey('Deployment/shop/broken')]: '{"c":',
          'application.properties': 'a=b',
        },
      },
    });
    const { ledger: l, logs } = ledger(kube, namespace, { shards: 1 });
    const loaded = await l.load();
    expect(loaded).toEqual(new Map([[good, { configs: { 'ConfigMap/shop/web-config': 'abc' } }]]));
    const skipped = logs.filter((line) => line.level === 'warn').map((line) => line.fields.key);
    expect(skipped.sort()).toEqual(['Deployment_2Fshop_2Fbroken', 'application.properties']);

    await l.put('Deployment/shop/api', entry(1));
    const cm = await kube.core.readNamespacedConfigMap({ name: 'gitops-reloader-ledger-0', namespace });
    expect(cm.data?.['application.properties']).toBe('a=b');
    expect(cm.data?.[ledgerKey('Deployment/shop/broken')]).toBe('{"c":');
  });

  it('never writes into a ConfigMap that has a shard name but is not a ledger', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({
      namespace,
      body: {
        metadata: { name: 'gitops-reloader-ledger-0', labels: { 'app.kubernetes.io/component': 'ledger' } },
        data: { [ledgerKey('Deployment/shop/web')]: JSON.stringify({ c: {} }) },
      },
    });
    const { ledger: l, logs } = ledger(kube, namespace, { shards: 1 });
    expect(await l.load()).toEqual(new Map());
    expect(logs).toContainEqual(expect.objectContaining({ level: 'warn', msg: 'ledger shard skipped' }));
    const err = await l.put('Deployment/shop/api', entry(1)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LedgerError);
    expect((err as Error).message).toMatch(
      /gitops-reloader-ledger-0 is not a gitops-reloader ledger .*Deployment\/shop\/api/,
    );
    const cm = await kube.core.readNamespacedConfigMap({ name: 'gitops-reloader-ledger-0', namespace });
    expect(Object.keys(cm.data ?? {})).toEqual([ledgerKey('Deployment/shop/web')]);
  });

  it('still finds entries after the shard count changes, and moves each home on its next write', async ({
    kube,
    namespace,
  }) => {
    const ids = Array.from({ length: 20 }, (_, i) => `Deployment/shop/app-${i}`);
    const small = ledger(kube, namespace, { shards: 1 }).ledger;
    await small.load();
    await small.putMany(ids.map((id, i): [string, LedgerEntry] => [id, entry(i)]));

    const { ledger: big, requests } = ledger(kube, namespace, { shards: 4 });
    expect((await big.load()).size).toBe(20);
    requests.clear();
    await big.putMany(ids.map((id, i): [string, LedgerEntry] => [id, entry(i)]));
    // Shards 1–3 are created; shard 0 is patched once, to drop the entries that moved away.
    expect(requests.lines().filter((r) => r.startsWith('POST '))).toHaveLength(3);
    expect(requests.lines().filter((r) => r.startsWith('PATCH '))).toHaveLength(1);

    const shards = await shardMaps(kube, namespace);
    for (const id of ids) {
      const holders = [...shards].filter(([, cm]) => cm.data?.[ledgerKey(id)] !== undefined).map(([n]) => n);
      expect(holders, id).toEqual([big.shardFor(id)]);
    }
    expect((await ledger(kube, namespace, { shards: 4 }).ledger.load()).size).toBe(20);
  });

  it('rethrows an API failure with the shard, the workload and the status', async ({ kube, namespace }) => {
    const { ledger: l } = ledger(kube, `${namespace}-missing`);
    await l.load();
    const err = await l.put('Deployment/shop/web', entry(1)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LedgerError);
    const e = err as LedgerError;
    expect(e.status).toBe(404);
    expect(e.shard).toBe(l.shardFor('Deployment/shop/web'));
    expect(e.workloads).toEqual(['Deployment/shop/web']);
    expect(e.message).toMatch(
      new RegExp(
        `creating ledger shard ${e.shard} for Deployment/shop/web in namespace ${namespace}-missing failed \\(HTTP 404\\): namespaces "${namespace}-missing" not found`,
      ),
    );
  });

  it('refuses to write before it has loaded', async ({ kube, namespace }) => {
    const { ledger: l, requests } = ledger(kube, namespace);
    await expect(l.put('Deployment/shop/web', entry(1))).rejects.toThrow(/must be loaded before/);
    expect(requests.lines()).toEqual([]);
  });
});
