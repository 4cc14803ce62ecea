// Leader election against the real API server: one leader at a time, a fast handover on stop(), a
// takeover within about one lease duration when the leader dies without releasing, and a leader that
// stops acting at once when its Lease is taken or within the renew deadline when it loses the API.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CoordinationV1Api, KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { describe, expect, inject } from 'vitest';
import { DEFAULT_TIMINGS, type LeaseTimings, microTime } from '../../service/core/lease-logic.ts';
import { writeGatedAccess } from '../../service/kube/access.ts';
import { type CoordinationApi, coordinationApi, coreApi } from '../../service/kube/api.ts';
import {
  type LeaderElection,
  type LeaderElectionOptions,
  type LeaderLog,
  LeadershipLost,
  leaderWriteFence,
  NotLeading,
  startLeaderElection,
} from '../../service/kube/leader.ts';
import { type Kube, it as kubeIt, statusOf } from '../support/kube.ts';
import { pending, waitFor } from '../support/wait-for.ts';

const LEASE = 'gitops-reloader-leader';
/** Short timings for the tests that are not about the defaults; they keep the same proportions. */
const FAST: LeaseTimings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };

interface LogLine {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

interface Term {
  startedAt: number;
  endedAt?: number;
  reason?: unknown;
}

/** An elector plus what its callbacks saw, timed on the same clock as the elector's. */
interface Candidate {
  name: string;
  e: LeaderElection;
  terms: Term[];
  stoppedCalls: number[];
  newLeaders: string[];
  logs: LogLine[];
}

function memoryLog(lines: LogLine[]): LeaderLog {
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) => {
    lines.push({ level, msg, fields });
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

type Start = (
  name: string,
  t: LeaseTimings,
  extra?: Partial<LeaderElectionOptions> & { api?: CoordinationApi },
) => Candidate;

/** `kube` and `namespace`, plus `start`, whose electors are stopped before the namespace goes. */
const it = kubeIt.extend<{ start: Start }>({
  start: async ({ kube, namespace }, use) => {
    const started: Candidate[] = [];
    await use((name, t, extra = {}) => {
      const c: Candidate = {
        name,
        e: undefined as unknown as LeaderElection,
        terms: [],
        stoppedCalls: [],
        newLeaders: [],
        logs: [],
      };
      const { api, ...opts } = extra;
      c.e = startLeaderElection(api ?? kube.kc, {
        namespace,
        name: LEASE,
        identity: name,
        ...t,
        onStartedLeading: (signal) => {
          const term: Term = { startedAt: performance.now() };
          c.terms.push(term);
          signal.addEventListener('abort', () => {
            term.endedAt = performance.now();
            term.reason = signal.reason;
          });
        },
        onStoppedLeading: () => {
          c.stoppedCalls.push(performance.now());
        },
        onNewLeader: (id) => c.newLeaders.push(id),
        log: memoryLog(c.logs),
        ...opts,
      });
      started.push(c);
      return c;
    });
    await Promise.all(started.map((c) => c.e.stop()));
  },
});

/** Samples isLeader() of every candidate every few ms until stopped; reports any moment with two leaders. */
function sampleLeaders(list: Candidate[]) {
  const overlaps: string[][] = [];
  let samples = 0;
  const timer = setInterval(() => {
    const leading = list.filter((c) => c.e.isLeader()).map((c) => c.name);
    samples++;
    if (leading.length > 1) overlaps.push(leading);
  }, 2);
  return {
    stop: () => {
      clearInterval(timer);
      return { samples, overlaps };
    },
  };
}

/** No two terms, of any candidates, overlap in time (a term runs from onStartedLeading to its abort). */
function expectNoOverlappingTerms(list: Candidate[]): void {
  const all = list.flatMap((c) => c.terms.map((t) => ({ name: c.name, ...t })));
  all.sort((a, b) => a.startedAt - b.startedAt);
  for (let i = 1; i < all.length; i++) {
    const prev = all[i - 1] as (typeof all)[number];
    const cur = all[i] as (typeof all)[number];
    expect(prev.endedAt, `${prev.name}'s term was still open when ${cur.name} started leading`).toBeDefined();
    expect(prev.endedAt as number).toBeLessThanOrEqual(cur.startedAt);
  }
}

function readLease(kube: Kube, namespace: string): Promise<V1Lease> {
  return kube.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace, name: LEASE });
}

/** The message of the reason term `i` of `c` ended with. */
function reasonOf(c: Candidate, i: number): string {
  const r = c.terms[i]?.reason;
  return r instanceof Error ? r.message : String(r);
}

const leading = (c: Candidate) => (c.e.isLeader() ? c : pending(`${c.name} is not leading`));

function report(what: string, ms: number, t: LeaseTimings): void {
  console.log(
    `[leader] ${what}: ${Math.round(ms)} ms (lease ${t.leaseDurationMs} ms, retry ${t.retryPeriodMs} ms)`,
  );
}

/** Blocks the event loop for `ms`: a stall (a long GC pause, a CPU-bound task) during which no timer runs. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: simulates the stall itself, not a wait for a condition
  }
}

describe('leader election on a Lease', () => {
  it('lets exactly one of two electors lead, and the Lease names it', async ({ kube, namespace, start }) => {
    const a = start('elector-a', FAST);
    const b = start('elector-b', FAST);
    const sampler = sampleLeaders([a, b]);
    const leader = await waitFor(() => (a.e.isLeader() ? a : b.e.isLeader() ? b : pending('no leader yet')), {
      describe: 'one elector to lead',
    });
    const standby = leader === a ? b : a;
    // Watch several renewals go by: the leader keeps the lease and the standby never leads.
    const renewals = new Set<string>();
    await waitFor(
      async () => {
        const l = await readLease(kube, namespace);
        renewals.add(String(l.spec?.renewTime));
        return renewals.size >= 5 ? l : pending({ renewals: renewals.size, holder: l.spec?.holderIdentity });
      },
      { describe: '5 renewals of the lease', interval: 50, timeout: 10_000 },
    );
    const { samples, overlaps } = sampler.stop();
    const lease = await readLease(kube, namespace);
    expect(overlaps).toEqual([]);
    expect(samples).toBeGreaterThan(100);
    expect(leader.terms).toHaveLength(1);
    expect(standby.terms).toHaveLength(0);
    expect(lease.spec?.holderIdentity).toBe(leader.name);
    expect(lease.spec?.leaseDurationSeconds).toBe(3);
    expect(lease.spec?.leaseTransitions).toBe(0);
    // MicroTime as the API server writes it back: six fraction digits.
    expect(String(lease.spec?.renewTime)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(standby.newLeaders).toEqual([leader.name]);
    expect(leader.newLeaders).toEqual([leader.name]);
    expect(a.e.leader()).toBe(leader.name);
    expect(b.e.leader()).toBe(leader.name);
  });

  it('hands over on stop(): the leader stops acting, releases, and the standby leads well within the lease duration', async ({
    kube,
    namespace,
    start,
  }) => {
    const t = DEFAULT_TIMINGS;
    let holderWhileStopping: string | undefined;
    const a = start('elector-a', t, {
      // Runs between the end of the term and the release: the Lease must still name a here.
      onStoppedLeading: async () => {
        a.stoppedCalls.push(performance.now());
        const l = await readLease(kube, namespace);
        holderWhileStopping = l.spec?.holderIdentity;
      },
    });
    await waitFor(() => leading(a), { describe: 'a to lead' });
    const b = start('elector-b', t);
    await waitFor(() => (b.e.leader() === 'elector-a' ? b : pending(b.e.leader())), {
      describe: 'b to see a as the leader',
    });
    const sampler = sampleLeaders([a, b]);
    const stopAt = performance.now();
    await a.e.stop();
    const releasedAt = performance.now();
    expect(a.e.isLeader()).toBe(false);
    expect(holderWhileStopping).toBe('elector-a');
    const released = await readLease(kube, namespace);
    await waitFor(() => leading(b), { describe: 'b to lead after a released', timeout: t.leaseDurationMs });
    const { overlaps } = sampler.stop();
    const takeover = (b.terms[0] as Term).startedAt - stopAt;
    report('takeover after stop() (release)', takeover, t);
    report('  of which stop() itself took', releasedAt - stopAt, t);

    expect(overlaps).toEqual([]);
    expectNoOverlappingTerms([a, b]);
    expect(a.terms[0]?.reason).toBeInstanceOf(LeadershipLost);
    expect(a.stoppedCalls).toHaveLength(1);
    // Released as client-go releases: no holder and a 1 s duration.
    if (released.spec?.holderIdentity === '' || released.spec?.holderIdentity === undefined) {
      expect(released.spec?.leaseDurationSeconds).toBe(1);
    } else {
      expect(released.spec?.holderIdentity).toBe('elector-b'); // b was quicker than our read
    }
    // b polls every retryPeriod (+20 % jitter) and takes a free lease at once.
    expect(takeover).toBeLessThan(t.retryPeriodMs * 1.2 + 1_500);
    expect(takeover).toBeLessThan(t.leaseDurationMs / 3);
    const lease = await readLease(kube, namespace);
    expect(lease.spec?.holderIdentity).toBe('elector-b');
    expect(lease.spec?.leaseTransitions).toBe(1);
    expect(lease.spec?.leaseDurationSeconds).toBe(15);
  });

  it('replaces a leader killed without releasing within about one lease duration', async ({
    kube,
    namespace,
    start,
  }) => {
    const t = DEFAULT_TIMINGS;
    const child = spawnElector(namespace, 'elector-killed', t);
    try {
      await waitFor(() => (child.out().includes('started-leading') ? true : pending(child.out())), {
        describe: 'the child elector to lead',
      });
      const b = start('elector-b', t);
      await waitFor(() => (b.e.leader() === 'elector-killed' ? b : pending(b.e.leader())), {
        describe: 'b to see the child as the leader',
      });
      const before = await readLease(kube, namespace);
      const killedAt = performance.now();
      child.proc.kill('SIGKILL');
      await waitFor(() => leading(b), { describe: 'b to take over', timeout: t.leaseDurationMs * 2 });
      const takeover = (b.terms[0] as Term).startedAt - killedAt;
      report('takeover after SIGKILL of the leader', takeover, t);

      // Not before the lease could have expired, and not long after.
      expect(takeover).toBeGreaterThan(t.leaseDurationMs - t.retryPeriodMs * 1.2 - 500);
      expect(takeover).toBeLessThan(t.leaseDurationMs + t.retryPeriodMs * 1.2 + 1_500);
      expect(child.out()).not.toContain('stopped-leading');
      const lease = await readLease(kube, namespace);
      expect(lease.spec?.holderIdentity).toBe('elector-b');
      expect(lease.spec?.leaseTransitions).toBe((before.spec?.leaseTransitions ?? 0) + 1);
      expect(String(lease.spec?.acquireTime)).not.toBe(String(before.spec?.acquireTime));
    } finally {
      child.proc.kill('SIGKILL');
    }
  });

  it('stops leading at its next renewal when someone else takes the Lease', async ({
    kube,
    namespace,
    start,
  }) => {
    const a = start('elector-a', FAST);
    await waitFor(() => leading(a), { describe: 'a to lead' });
    const b = start('elector-b', FAST);
    await waitFor(() => (b.e.leader() === 'elector-a' ? b : pending(b.e.leader())), {
      describe: 'b to see a as the leader',
    });
    const sampler = sampleLeaders([a, b]);
    const lease = await readLease(kube, namespace);
    const now = microTime(Date.now());
    const stolen = await kube.kc.makeApiClient(CoordinationV1Api).replaceNamespacedLease({
      namespace,
      name: LEASE,
      body: {
        ...lease,
        spec: {
          ...lease.spec,
          holderIdentity: 'intruder',
          renewTime: now as unknown as Date,
          acquireTime: now as unknown as Date,
          leaseDurationSeconds: 3,
        },
      },
    });
    const stolenAt = performance.now();
    await waitFor(() => (a.e.isLeader() ? pending('a still leads') : true), {
      describe: 'a to stop leading',
      interval: 5,
    });
    const gaveUp = performance.now() - stolenAt;
    report('leader gave up after its Lease was taken', gaveUp, FAST);
    // At its next renewal: one retry period, plus a read and a write, plus slack for a loaded machine.
    expect(gaveUp).toBeLessThan(FAST.retryPeriodMs + 1_000);
    expect(a.terms[0]?.reason).toBeInstanceOf(LeadershipLost);
    expect(reasonOf(a, 0)).toContain('held by intruder');
    expect(a.stoppedCalls).toHaveLength(1);
    // Nobody takes the intruder's lease before it expires in their eyes; then one of them does.
    const next = await waitFor(() => (a.e.isLeader() ? a : b.e.isLeader() ? b : pending('no leader')), {
      describe: 'a new leader after the intruder stops renewing',
      timeout: 10_000,
    });
    const retaken = (next.terms.at(-1) as Term).startedAt - stolenAt;
    report('lease retaken from a silent intruder', retaken, FAST);
    expect(retaken).toBeGreaterThanOrEqual(FAST.leaseDurationMs - 200);
    const { overlaps } = sampler.stop();
    expect(overlaps).toEqual([]);
    expectNoOverlappingTerms([a, b]);
    const after = await readLease(kube, namespace);
    expect(after.spec?.leaseTransitions).toBe((stolen.spec?.leaseTransitions ?? 0) + 1);
  });

  it('ends the term when the Lease is deleted, and leads again on a new Lease', async ({
    kube,
    namespace,
    start,
  }) => {
    const a = start('elector-a', FAST);
    await waitFor(() => leading(a), { describe: 'a to lead' });
    await kube.kc.makeApiClient(CoordinationV1Api).deleteNamespacedLease({ namespace, name: LEASE });
    await waitFor(() => (a.terms.length === 2 && a.e.isLeader() ? true : pending(a.terms.length)), {
      describe: 'a second term on a new Lease',
      timeout: 5_000,
    });
    expect(reasonOf(a, 0)).toContain('the Lease was deleted');
    expect(a.stoppedCalls).toHaveLength(1);
    expect(a.stoppedCalls[0] as number).toBeLessThanOrEqual((a.terms[1] as Term).startedAt);
    expect((await readLease(kube, namespace)).spec?.leaseTransitions).toBe(0);
  });

  it('stops leading within the renew deadline when its API requests hang, before the standby takes over', async ({
    kube,
    start,
  }) => {
    const net = switchableApi(kube.kc);
    const a = start('elector-a', FAST, { api: net.api });
    await waitFor(() => leading(a), { describe: 'a to lead' });
    const b = start('elector-b', FAST);
    await waitFor(() => (b.e.leader() === 'elector-a' ? b : pending(b.e.leader())), {
      describe: 'b to see a as the leader',
    });
    const sampler = sampleLeaders([a, b]);
    try {
      net.set('hang');
      const brokenAt = performance.now();
      await waitFor(() => leading(b), { describe: 'b to take over', timeout: 10_000 });
      const { overlaps } = sampler.stop();
      const aEnded = (a.terms[0] as Term).endedAt as number;
      report('leader with hanging requests gave up', aEnded - brokenAt, FAST);
      report('standby took over from it', (b.terms[0] as Term).startedAt - brokenAt, FAST);
      expect(overlaps).toEqual([]);
      expectNoOverlappingTerms([a, b]);
      expect(aEnded - brokenAt).toBeLessThanOrEqual(FAST.renewDeadlineMs + 250);
      expect(reasonOf(a, 0)).toContain('renew deadline');
      expect(a.logs).toContainEqual(
        expect.objectContaining({ level: 'warn', msg: 'lost the lease; stopped leading' }),
      );
    } finally {
      net.set('ok');
    }
  });

  it('works with get, create and update on leases only, and gives up within the renew deadline once that is revoked', async ({
    kube,
    namespace,
    start,
  }) => {
    const kc = await serviceAccountKubeConfig(kube, namespace, 'elector');
    await grantLeases(kube, namespace, 'elector', ['get', 'create', 'update']);
    const a = start('elector-a', FAST, { api: coordinationApi(kc) });
    await waitFor(() => leading(a), { describe: 'a to lead with its narrow Role' });
    const renewals = new Set<string>();
    await waitFor(
      async () => {
        renewals.add(String((await readLease(kube, namespace)).spec?.renewTime));
        return renewals.size >= 3 ? true : pending(renewals.size);
      },
      { describe: '3 renewals under the narrow Role', interval: 50 },
    );
    expect(a.logs.filter((l) => l.level !== 'debug' && l.level !== 'info')).toEqual([]);
    await kube.rbac.deleteNamespacedRoleBinding({ namespace, name: 'elector' });
    const revokedAt = performance.now();
    await waitFor(() => (a.e.isLeader() ? pending('a still leads') : true), {
      describe: 'a to give up',
      timeout: 5_000,
      interval: 5,
    });
    const gaveUp = performance.now() - revokedAt;
    report('leader without API access gave up', gaveUp, FAST);
    expect(gaveUp).toBeLessThanOrEqual(FAST.renewDeadlineMs + 250);
    expect(
      a.logs.some((l) => l.msg === 'could not renew the lease' && String(l.fields.err).startsWith('403')),
    ).toBe(true);
  });

  it('reports isLeader() false once the renew deadline passes, even while the event loop is blocked', async ({
    namespace: _,
    start,
  }) => {
    const a = start('elector-a', FAST);
    await waitFor(() => leading(a), { describe: 'a to lead' });
    // A stall (a long GC pause, a CPU-bound task) longer than the renew deadline: no timer can run.
    stall(FAST.renewDeadlineMs + 100);
    expect(a.e.isLeader()).toBe(false);
    expect(reasonOf(a, 0)).toContain('renew deadline');
  });

  it('refuses a write queued across a stall past the write deadline, before any timer has run', async ({
    kube,
    namespace,
    start,
  }) => {
    const a = start('elector-a', FAST);
    await waitFor(() => leading(a), { describe: 'a to lead' });
    // The service's leader writes: the write gate (here: a turn the test grants) with the Lease
    // checked by the clock immediately before sending.
    const leaderWrites = (turn: Promise<void>) =>
      coreApi(
        writeGatedAccess(
          kube.kc,
          () => turn,
          leaderWriteFence(() => a.e),
        ),
      );
    const cm = (name: string) => ({ namespace, body: { metadata: { name }, data: { k: 'v' } } });
    await leaderWrites(Promise.resolve()).createNamespacedConfigMap(cm('written-while-leading'));
    // A write waiting for its turn when the process stalls past the write deadline...
    let late!: () => void;
    const fenced = leaderWrites(new Promise<void>((r) => (late = r)));
    const queued = fenced.createNamespacedConfigMap(cm('queued-across-the-stall'));
    stall(FAST.renewDeadlineMs + 100);
    // ...gets its turn the moment the process runs again, before the term's timer: it is not sent.
    late();
    await expect(queued).rejects.toThrow(NotLeading);
    const names = (await kube.core.listNamespacedConfigMap({ namespace })).items.map((c) => c.metadata?.name);
    expect(names).toContain('written-while-leading');
    expect(names).not.toContain('queued-across-the-stall');
  });

  it('refuses timings that could let two leaders overlap, naming the option', async ({ kube, namespace }) => {
    const base = {
      namespace,
      name: LEASE,
      onStartedLeading: () => undefined,
      onStoppedLeading: () => undefined,
      log: memoryLog([]),
    };
    expect(() =>
      startLeaderElection(kube.kc, { ...base, leaseDurationMs: 10_000, renewDeadlineMs: 10_000 }),
    ).toThrow(/renewDeadlineMs \(10000\) must be less than leaseDurationMs/);
    expect(() => startLeaderElection(kube.kc, { ...base, leaseDurationMs: 2_500 })).toThrow(/whole seconds/);
    expect(() => startLeaderElection(kube.kc, { ...base, identity: '' })).toThrow(/identity/);
    await expect(
      kube.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace, name: LEASE }),
    ).rejects.toSatisfy((e) => statusOf(e) === 404);
  });
});

/** An elector in its own process, so it can be killed without a chance to release. */
function spawnElector(namespace: string, identity: string, t: LeaseTimings) {
  const leaderModule = fileURLToPath(new URL('../../service/kube/leader.ts', import.meta.url));
  const script = `
    import { KubeConfig } from '@kubernetes/client-node';
    import { startLeaderElection } from ${JSON.stringify(leaderModule)};
    const kc = new KubeConfig();
    kc.loadFromFile(process.env.ELECTOR_KUBECONFIG);
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    startLeaderElection(kc, {
      namespace: ${JSON.stringify(namespace)},
      name: ${JSON.stringify(LEASE)},
      identity: ${JSON.stringify(identity)},
      ...${JSON.stringify(t)},
      onStartedLeading: () => console.log('started-leading'),
      onStoppedLeading: () => console.log('stopped-leading'),
      log: quiet,
    });
  `;
  const proc = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    env: { ...process.env, ELECTOR_KUBECONFIG: inject('kubeconfig') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (c) => {
    out += c;
  });
  proc.stderr.on('data', (c) => {
    out += c;
  });
  return { proc, out: () => out };
}

/** The service's lease API whose requests can be made to hang, as on a dead network path to the API server. */
function switchableApi(kc: KubeConfig) {
  const real = coordinationApi(kc);
  let mode: 'ok' | 'hang' = 'ok';
  const healed: Array<() => void> = [];
  const gate = async () => {
    if (mode === 'hang') await new Promise<void>((r) => healed.push(r));
  };
  const api: CoordinationApi = {
    readNamespacedLease: async (a, o) => {
      await gate();
      return real.readNamespacedLease(a, o);
    },
    createNamespacedLease: async (a, o) => {
      await gate();
      return real.createNamespacedLease(a, o);
    },
    replaceNamespacedLease: async (a, o) => {
      await gate();
      return real.replaceNamespacedLease(a, o);
    },
  };
  return {
    api,
    set(m: 'ok' | 'hang') {
      mode = m;
      if (m === 'ok') for (const r of healed.splice(0)) r();
    },
  };
}

/** A kubeconfig for a new ServiceAccount in the namespace. */
async function serviceAccountKubeConfig(kube: Kube, namespace: string, name: string): Promise<KubeConfig> {
  await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  const token = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 600 } },
  });
  const cluster = kube.kc.getCurrentCluster();
  if (!cluster) throw new Error('admin kubeconfig has no cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: token.status?.token }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  return kc;
}

async function grantLeases(kube: Kube, namespace: string, account: string, verbs: string[]) {
  await kube.rbac.createNamespacedRole({
    namespace,
    body: {
      metadata: { name: account },
      rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs }],
    },
  });
  await kube.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: account },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: account },
      subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
    },
  });
}
