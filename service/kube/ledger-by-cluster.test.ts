// Hub mode (issue 36, ADR 0043): a term's start for one served cluster lists that cluster's ledger
// shards and job records only, not every cluster's in the release namespace. The API server here is a
// recording in-memory one that evaluates label selectors (`k=v`, `!k`) and pages (limit/continue) as
// the real one does; what it records is every LIST and every item each LIST returned.
import { describe, expect, it } from 'vitest';
import type { CoreApi } from './api.ts';
import { JobSpecStore } from './job-spec-store.ts';
import { CLUSTER_ID_LABEL, Ledger } from './ledger.ts';

type Cm = {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  data: Record<string, string>;
};

const matches = (labels: Record<string, string>, selector: string) =>
  selector.split(',').every((term) => {
    if (term.startsWith('!')) return !(term.slice(1) in labels);
    const [k, v] = term.split('=') as [string, string];
    return labels[k] === v;
  });

/** An in-memory namespace of ConfigMaps that records each LIST (selector, names returned). */
function recordingCore() {
  const cms = new Map<string, Cm>();
  const lists: Array<{ selector: string; names: string[] }> = [];
  /** Every read by name (GET), with whether the ConfigMap was there. */
  const reads: Array<{ name: string; found: boolean }> = [];
  const copy = <T>(x: T) => structuredClone(x);
  const merge = (into: Record<string, string> | undefined, from: Record<string, string | null> = {}) => {
    const out = { ...(into ?? {}) };
    for (const [k, v] of Object.entries(from)) {
      if (v === null) delete out[k];
      else out[k] = v;
    }
    return out;
  };
  const core = {
    async listNamespacedConfigMap(o: { labelSelector: string; limit?: number; _continue?: string }) {
      const all = [...cms.values()]
        .filter((c) => matches(c.metadata.labels ?? {}, o.labelSelector))
        .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
      const from = Number(o._continue ?? 0);
      const page = all.slice(from, o.limit ? from + o.limit : undefined);
      const next = from + page.length < all.length ? String(from + page.length) : undefined;
      lists.push({ selector: o.labelSelector, names: page.map((c) => c.metadata.name) });
      return { items: page.map(copy), metadata: { _continue: next } };
    },
    async readNamespacedConfigMap({ name }: { name: string }) {
      const cm = cms.get(name);
      reads.push({ name, found: cm !== undefined });
      if (!cm) throw Object.assign(new Error('not found'), { code: 404 });
      return copy(cm);
    },
    async createNamespacedConfigMap({ body }: { body: Cm }) {
      if (cms.has(body.metadata.name)) throw Object.assign(new Error('exists'), { code: 409 });
      cms.set(body.metadata.name, copy({ ...body, data: body.data ?? {} }));
      return copy(cms.get(body.metadata.name));
    },
    async patchNamespacedConfigMap({
      name,
      body,
    }: {
      name: string;
      body: { metadata?: Cm['metadata']; data?: Record<string, string | null> };
    }) {
      const cm = cms.get(name);
      if (!cm) throw Object.assign(new Error('not found'), { code: 404 });
      cm.metadata.labels = merge(cm.metadata.labels, body.metadata?.labels);
      cm.metadata.annotations = merge(cm.metadata.annotations, body.metadata?.annotations);
      cm.data = merge(cm.data, body.data);
      return copy(cm);
    },
  } as unknown as CoreApi;
  return { core, cms, lists, reads };
}

const ids = [
  'alpha-0123456789abcdef0123456789abcdef',
  'beta-0123456789abcdef0123456789abcdef',
  'gamma-0123456789abcdef0123456789abcdef',
];
const ledgerOf = (
  core: CoreApi,
  id: string | undefined,
  prefixId = id,
  unlabelledMayExist?: () => Promise<boolean>,
) =>
  new Ledger({
    core,
    namespace: 'hub',
    prefix: `rel-${prefixId}`,
    shards: 8,
    owner: id,
    ...(unlabelledMayExist ? { unlabelledMayExist } : {}),
    log: () => undefined,
  });
const entry = { configs: { 'ConfigMap/shop/app': 'd1' } };

/** Writes 40 workloads' entries for a cluster (filling its 8 shards), labelled, or as before the label. */
async function fill(core: CoreApi, id: string, labelled: boolean) {
  const l = ledgerOf(core, labelled ? id : undefined, id);
  await l.load();
  await l.putMany(
    Array.from({ length: 40 }, (_, i) => [`Deployment/shop/w${i}`, entry] as [string, typeof entry]),
  );
}

describe("a term's start reads its own cluster's state only", () => {
  it("lists only the cluster's labelled ledger shards, even beside other clusters' from before the label", async () => {
    const { core, lists, reads } = recordingCore();
    for (const id of ids) await fill(core, id, true);
    // A cluster served before the label and no longer: its shards stay unlabelled for ever.
    await fill(core, 'delta-0123456789abcdef0123456789abcdef', false);
    lists.length = 0;
    reads.length = 0;
    const l = ledgerOf(core, ids[0]);
    const loaded = await l.load();
    expect(loaded.size).toBe(40);
    // Every item any LIST returned is the cluster's own: nothing of the other clusters' 24 shards.
    const returned = lists.flatMap((x) => x.names);
    expect(returned.length).toBe(8);
    expect(returned.every((n) => n.startsWith(`rel-${ids[0]}-ledger-`))).toBe(true);
    // 8 shards in pages of 4: two LISTs; nothing read by name (all 8 were listed).
    expect(lists.map((x) => x.selector)).toEqual([
      `app.kubernetes.io/component=ledger,${CLUSTER_ID_LABEL}=${ids[0]}`,
      `app.kubernetes.io/component=ledger,${CLUSTER_ID_LABEL}=${ids[0]}`,
    ]);
    expect(reads).toEqual([]);
  });

  it('reads by name only its own shards not listed, and none when the hub knows no unlabelled shard exists', async () => {
    const { core, lists, reads } = recordingCore();
    for (const id of ids.slice(1)) await fill(core, id, false);
    // One workload: one shard of 8 written.
    const small = ledgerOf(core, ids[0]);
    await small.load();
    await small.putMany([['Deployment/shop/w0', entry]]);
    lists.length = 0;
    reads.length = 0;
    expect((await ledgerOf(core, ids[0]).load()).size).toBe(1);
    expect(lists.flatMap((x) => x.names)).toHaveLength(1);
    // The other 7 of its names are read (not there), nothing of the others' 16 unlabelled shards.
    expect(reads.map((r) => r.name).every((n) => n.startsWith(`rel-${ids[0]}-ledger-`))).toBe(true);
    expect(reads.filter((r) => !r.found)).toHaveLength(7);
    reads.length = 0;
    expect((await ledgerOf(core, ids[0], ids[0], async () => false).load()).size).toBe(1);
    expect(reads).toEqual([]);
  });

  it('without an owner (single-cluster mode) still lists every ledger shard, as before', async () => {
    const { core, lists } = recordingCore();
    for (const id of ids) await fill(core, id, true);
    lists.length = 0;
    await ledgerOf(core, undefined, ids[0]).load();
    expect(lists.flatMap((x) => x.names).length).toBe(24);
  });

  it('upgrade: shards written before the label are read by name, then labelled, and read by label after', async () => {
    const { core, cms, lists, reads } = recordingCore();
    // An install from before: every cluster's shards unlabelled.
    for (const id of ids) await fill(core, id, false);
    const l = ledgerOf(core, ids[0]);
    l.fence(new AbortController().signal);
    expect((await l.load()).size).toBe(40); // found by name
    await l.labelOwn();
    const own = [...cms.values()].filter((c) => c.metadata.name.startsWith(`rel-${ids[0]}-`));
    expect(own.every((c) => c.metadata.labels?.[CLUSTER_ID_LABEL] === ids[0])).toBe(true);
    // The other clusters' are untouched until their own terms label them.
    const others = [...cms.values()].filter((c) => !c.metadata.name.startsWith(`rel-${ids[0]}-`));
    expect(others.some((c) => c.metadata.labels?.[CLUSTER_ID_LABEL] !== undefined)).toBe(false);
    for (const id of ids.slice(1)) {
      const o = ledgerOf(core, id);
      await o.load();
      await o.labelOwn();
    }
    lists.length = 0;
    reads.length = 0;
    const again = ledgerOf(core, ids[0]);
    expect((await again.load()).size).toBe(40);
    expect(lists.flatMap((x) => x.names).every((n) => n.startsWith(`rel-${ids[0]}-`))).toBe(true);
    expect(reads).toEqual([]); // all 8 are labelled now: listed, nothing read by name
  });

  it("lists only the cluster's job records (and unlabelled ones from before)", async () => {
    const { core, lists } = recordingCore();
    const rec = (ns: string, name: string) => ({
      namespace: ns,
      name,
      oldUid: '00000000-0000-0000-0000-000000000001',
      cutoff: '2026-12-06T10:00:00.000Z',
      phase: 'deleting' as const,
      job: { apiVersion: 'batch/v1', kind: 'Job', metadata: { name, namespace: ns }, spec: {} },
    });
    const stores = ids.map(
      (id) =>
        new JobSpecStore({ core, namespace: 'hub', prefix: `rel-${id}`, owner: id, warn: () => undefined }),
    );
    const signal = new AbortController().signal;
    for (const s of stores) for (let i = 0; i < 3; i++) await s.save(rec('jobs', `j${i}`) as never, signal);
    lists.length = 0;
    const mine = await (stores[0] as JobSpecStore).list();
    expect(mine.length).toBe(3);
    expect(lists.flatMap((x) => x.names).every((n) => n.startsWith(`rel-${ids[0]}-job-`))).toBe(true);
    // Records of a release from before the label (no owner): listed while the hub has seen some, and
    // not at all once it knows there are none.
    const old = new JobSpecStore({ core, namespace: 'hub', prefix: 'rel-old', warn: () => undefined });
    await old.save(rec('jobs', 'j9') as never, signal);
    const asking = (answer: boolean) =>
      new JobSpecStore({
        core,
        namespace: 'hub',
        prefix: `rel-${ids[0]}`,
        owner: ids[0],
        unlabelledMayExist: async () => answer,
        warn: () => undefined,
      });
    lists.length = 0;
    await asking(true).list();
    expect(lists.map((x) => x.selector)).toEqual([
      `app.kubernetes.io/component=job-spec,${CLUSTER_ID_LABEL}=${ids[0]}`,
      `app.kubernetes.io/component=job-spec,!${CLUSTER_ID_LABEL}`,
    ]);
    lists.length = 0;
    expect((await asking(false).list()).length).toBe(3);
    expect(lists.map((x) => x.selector)).toEqual([
      `app.kubernetes.io/component=job-spec,${CLUSTER_ID_LABEL}=${ids[0]}`,
    ]);
  });
});
