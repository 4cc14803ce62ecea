// The seeded schedules of the engine simulation (test/sim/sim.ts): what the world does and when. A
// schedule is data, so a failing one prints as JSON and shrinks by dropping steps.

/** mulberry32: a small seeded PRNG, enough to pick schedules. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** How an Argo CD notification reaches the service: once, never, twice, or late (after later steps). */
export type Delivery = 'ok' | 'lost' | 'dup' | 'late';

export type Step = {
  at: number;
} /** The config's data changes. */ /** `bad`: pods that read the new content never become Ready (a broken config, until its fix). */ & (
  | { kind: 'update'; config: string; bad?: boolean }
  /** Labels, annotations and resourceVersion change; the data does not. */
  | { kind: 'meta'; config: string }
  | { kind: 'delete'; config: string }
  /** Created again under its old name (a new uid), with the data it had (`same`) or new data. */
  | { kind: 'recreate'; config: string; same: boolean }
  /** The Deployment's pod template changes: its controller replaces every pod. */
  | { kind: 'template'; workload: string }
  | { kind: 'wdelete'; workload: string }
  /** Created again (a new uid) with new pods, if it was deleted. */
  | { kind: 'wrecreate'; workload: string }
  /** The leader changes: the term ends, a new one starts at once in the same process. */
  | { kind: 'term' }
  /** The process dies; nothing runs until the next `restart` (or the end of the schedule). */
  | { kind: 'crash' }
  /** The process starts again, if it was down, maybe with a new HMAC key (the ledger naming the old one, or none). */
  | { kind: 'restart'; rekey: 'none' | 'fingerprint' | 'unknown' }
  | { kind: 'syncStart'; app: string; deliver: Delivery }
  | { kind: 'syncEnd'; app: string; ok: boolean; deliver: Delivery }
);

export interface Schedule {
  seed: number;
  /** Configs, and the Argo CD Application that tracks each (by the instance label), if any. */
  configs: Array<{ name: string; app?: string }>;
  /** Deployment name → the configs it reads (optional or not), and its replicas. */
  deployments: Array<{ name: string; uses: Array<{ config: string; optional: boolean }>; replicas: number }>;
  apps: string[];
  /** `watched`: the Application watch sees syncs; `notified`: only notifications say so (ADR 0013). */
  argo: { mode: 'watched' | 'notified'; onFailedSync: 'reload' | 'hold' };
  steps: Step[];
  minIntervalMs: number;
  /** Chances per attempt while the faults last (the first `faultsUntil` ms). */
  pFail: number;
  pStall: number;
  pWait: number;
  /** Chance that a ledger write (or the catch-up's pod LIST) fails: 409, 500, or a timeout that applied it. */
  pLedger: number;
  /** Chance that an Event is not recorded (the recorder logs and goes on, as the real one does). */
  pEvent: number;
  faultsUntil: number;
}

export function randomSchedule(seed: number): Schedule {
  const r = prng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T;
  const apps = r() < 0.5 ? [] : Array.from({ length: 1 + Math.floor(r() * 2) }, (_, i) => `app${i}`);
  const configs = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, i) => ({
    name: `cm${i}`,
    ...(apps.length > 0 && r() < 0.7 ? { app: pick(apps) } : {}),
  }));
  const names = configs.map((c) => c.name);
  const deployments = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, i) => {
    const used = names.filter(() => r() < 0.6);
    return {
      name: `web${i}`,
      uses: (used.length > 0 ? used : [pick(names)]).map((config) => ({ config, optional: r() < 0.25 })),
      replicas: 1 + Math.floor(r() * 3),
    };
  });
  const workloads = deployments.map((d) => d.name);
  const delivery = (): Delivery => (r() < 0.6 ? 'ok' : pick(['lost', 'dup', 'late'] as const));
  const kinds: Array<[number, () => Omit<Step, 'at'>]> = [
    [30, () => ({ kind: 'update', config: pick(names) })],
    [8, () => ({ kind: 'meta', config: pick(names) })],
    [6, () => ({ kind: 'delete', config: pick(names) })],
    [6, () => ({ kind: 'recreate', config: pick(names), same: r() < 0.5 })],
    [6, () => ({ kind: 'template', workload: pick(workloads) })],
    [3, () => ({ kind: 'wdelete', workload: pick(workloads) })],
    [3, () => ({ kind: 'wrecreate', workload: pick(workloads) })],
    [4, () => ({ kind: 'term' })],
    [4, () => ({ kind: 'crash' })],
    [5, () => ({ kind: 'restart', rekey: r() < 0.7 ? 'none' : r() < 0.5 ? 'fingerprint' : 'unknown' })],
    ...(apps.length > 0
      ? ([
          [8, () => ({ kind: 'syncStart', app: pick(apps), deliver: delivery() })],
          [8, () => ({ kind: 'syncEnd', app: pick(apps), ok: r() < 0.7, deliver: delivery() })],
        ] as Array<[number, () => Omit<Step, 'at'>]>)
      : []),
  ];
  const total = kinds.reduce((n, [w]) => n + w, 0);
  const steps: Step[] = [];
  let at = 0;
  for (let n = 2 + Math.floor(r() * 12); n > 0; n--) {
    // Bursts (a change while the last one's reload runs or waits) and quiet spells.
    at += Math.floor(r() * (r() < 0.6 ? 4_000 : 30_000));
    let x = r() * total;
    let make = (kinds[0] as (typeof kinds)[number])[1];
    for (const [w, m] of kinds) {
      make = m;
      x -= w;
      if (x < 0) break;
    }
    steps.push({ at, ...make() } as Step);
  }
  return {
    seed,
    configs,
    deployments,
    apps,
    argo: { mode: r() < 0.5 ? 'watched' : 'notified', onFailedSync: r() < 0.5 ? 'reload' : 'hold' },
    steps,
    minIntervalMs: pick([0, 5_000, 10_000, 30_000]),
    pFail: r() * 0.6,
    pStall: r() * 0.3,
    pWait: r() * 0.2,
    pLedger: r() < 0.5 ? 0 : r() * 0.3,
    pEvent: r() * 0.5,
    faultsUntil: at + 30_000,
  };
}

/**
 * The schedule with broken contents (progressive reloads, issue 34): about a third of its data updates
 * write a content whose pods never become Ready, most followed by their fix (a good update of the same
 * config, 2 to 92 s later: before or after the canary is judged). Its own random stream: the base
 * schedule stays the seed's.
 */
export function withBadContents(base: Schedule): Schedule {
  const r = prng(base.seed ^ 0x5bd1e995);
  const steps: Step[] = [];
  for (const step of base.steps) {
    if (step.kind !== 'update' || r() >= 0.35) {
      steps.push(step);
      continue;
    }
    steps.push({ ...step, bad: true });
    if (r() < 0.7)
      steps.push({ at: step.at + 2_000 + Math.floor(r() * 90_000), kind: 'update', config: step.config });
  }
  const last = Math.max(0, ...steps.map((x) => x.at));
  return { ...base, steps, faultsUntil: Math.max(base.faultsUntil, last + 30_000) };
}

/** Drops steps one at a time while the schedule still fails: a shorter schedule to read. */
export async function shrink(s: Schedule, fails: (s: Schedule) => Promise<boolean>): Promise<Schedule> {
  let cur = s;
  for (let i = cur.steps.length - 1; i >= 0; i--) {
    const next = { ...cur, steps: cur.steps.filter((_, j) => j !== i) };
    if (await fails(next)) cur = next;
  }
  return cur;
}
