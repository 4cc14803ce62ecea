// What the service decided about a change it observed (issue 33, item 2; docs/design.md, "A negative
// check waits for a decision"). "Nothing reloaded" is proven once the service has said what it did with
// that change, a log line naming the config and its resourceVersion, or once its status shows nothing
// under way for the workload; a window of time proves only that it had not acted yet.
import type { LogLine } from './service.ts';
import { pending, waitFor } from './wait-for.ts';

/** One observed change: the config (`ConfigMap/ns/name`) at a resourceVersion (or any later one). */
export interface ObservedChange {
  config: string;
  resourceVersion: string;
}

/** A service whose log lines a test reads (a child process, or the service run in-process). */
export interface Logged {
  logs: LogLine[];
}

/** The lines by which the service says it decided a change does not reload the workload now. */
export const NO_RELOAD_DECISIONS: readonly string[] = [
  'config change ignored: its namespace is not in scope',
  'config change needs no reload: its data and annotations are unchanged',
  'config change held until the Argo CD sync ends',
  'config change held until the Flux reconciliation ends',
  'change ignored: the workload is gone or not in scope',
  'change ignored: invalid reload annotations',
  'no reload: the workload reloads on none of its configs',
  'baseline recorded',
  'watched configs changed; recorded',
  'no reload needed',
];

/** The same resourceVersion or a later one (etcd's are integers; anything else compares equal only). */
function atLeast(seen: unknown, rv: string): boolean {
  if (typeof seen !== 'string') return false;
  if (seen === rv) return true;
  return /^\d+$/.test(seen) && /^\d+$/.test(rv) && BigInt(seen) > BigInt(rv);
}

/** `ConfigMap/ns/app` → `ConfigMap/app`, as the reload lines name a config. */
const display = (id: string) => {
  const [kind, , ...name] = id.split('/');
  return `${kind}/${name.join('/')}`;
};

/** `Deployment/ns/web` → `Deployment/web`: the gates name a workload by its id, the engine by kind/name. */
const short = (id: string) => {
  const [kind, ...rest] = id.split('/');
  return rest.length >= 2 ? `${kind}/${rest.slice(1).join('/')}` : id;
};

/** Whether this line is the service's decision about the change (for `workload`, if given). */
export function decides(l: LogLine, c: ObservedChange, workload?: string): boolean {
  if (workload !== undefined && l.workload !== undefined && short(String(l.workload)) !== short(workload))
    return false;
  const configs = Array.isArray(l.configs) ? (l.configs as string[]) : [];
  // A reload names the newest resourceVersion among the configs it was planned for (changeRV).
  if (l.msg === 'reload started' || l.msg === 'dry-run: would reload')
    return configs.includes(display(c.config)) && atLeast(l.changeRV, c.resourceVersion);
  if (l.msg === 'config changed')
    // The decision only when no workload reloads on it; else the workloads' decisions follow.
    return (
      workload === undefined &&
      l.affected === 0 &&
      l.config === c.config &&
      atLeast(l.resourceVersion, c.resourceVersion)
    );
  if (!NO_RELOAD_DECISIONS.includes(l.msg)) return false;
  if (l.config === c.config) return atLeast(l.resourceVersion, c.resourceVersion);
  if (!configs.includes(c.config)) return false;
  const versions = l.resourceVersions as Record<string, string> | undefined;
  return atLeast(versions?.[c.config] ?? l.resourceVersion, c.resourceVersion);
}

/**
 * Waits for the service's decision about the change, for `workload` (`Deployment/name` or
 * `Deployment/ns/name`) when given, and expects it not to be a reload: the decision line. Looks only
 * at lines from `from` on (an index into the logs), default all.
 */
export async function decidedNoReload(
  svc: Logged,
  c: ObservedChange,
  o: { workload?: string; from?: number; timeout?: number } = {},
): Promise<LogLine> {
  const line = await waitFor(
    () =>
      svc.logs.slice(o.from ?? 0).find((l) => decides(l, c, o.workload)) ??
      pending(svc.logs.slice(-5).map((l) => l.msg)),
    {
      describe: `the decision about ${c.config}@${c.resourceVersion}${o.workload ? ` for ${o.workload}` : ''}`,
      timeout: o.timeout ?? 30_000,
    },
  );
  if (!NO_RELOAD_DECISIONS.includes(line.msg) && line.msg !== 'config changed')
    throw new Error(`expected no reload of ${c.config}@${c.resourceVersion}, but: ${JSON.stringify(line)}`);
  return line;
}

/** The change an API write left: its config id and the resourceVersion the API server gave it. */
export function changeOf(
  kind: 'ConfigMap' | 'Secret',
  o: { metadata?: { namespace?: string; name?: string; resourceVersion?: string } },
): ObservedChange {
  const m = o.metadata ?? {};
  if (!m.namespace || !m.name || !m.resourceVersion)
    throw new Error(`not a written ${kind}: ${JSON.stringify(m)}`);
  return { config: `${kind}/${m.namespace}/${m.name}`, resourceVersion: m.resourceVersion };
}

interface EngineStatus {
  leader: boolean;
  running?: Array<{ workload: string }>;
  waiting?: Array<{ workload: string; why: string }>;
}

/** The engine's status (engine/status.ts), from the URL the service logged or as it returns it. */
export async function engineStatus(svc: Logged & { status?: () => unknown }): Promise<EngineStatus> {
  if (svc.status) return svc.status() as EngineStatus;
  const line = svc.logs.find((l) => l.msg === 'status listening');
  if (!line) throw new Error('the service logged no status address (status listening)');
  const res = await fetch(`${String(line.url)}/status`);
  if (!res.ok) throw new Error(`status: HTTP ${res.status}`);
  return (await res.json()) as EngineStatus;
}

/** The engine's status for one served cluster in hub mode, or the service's own otherwise. */
function engineOf(
  s: EngineStatus & { hub?: boolean; clusters?: Record<string, EngineStatus & { name?: string }> },
  cluster?: string,
) {
  if (!s.hub) return s;
  // Keyed by cluster id; the tests name their clusters uniquely.
  const c = cluster ? Object.values(s.clusters ?? {}).find((x) => x.name === cluster) : undefined;
  return c && typeof c.leader === 'boolean' ? c : { leader: false };
}

/**
 * Waits until the leading service (of `services`: the one that acts; in hub mode, for `cluster`) has
 * nothing under way for `workload` (`Kind/ns/name`): no reload running, and none debouncing, held for
 * a sync, queued, retried, or held for a window, a wave or the brake. After the decision about a
 * change, this is the service saying it will do nothing more for it; a reload still under way is
 * waited for, so the check that follows sees it.
 */
export async function idle(
  services: (Logged & { status?: () => unknown }) | Array<Logged & { status?: () => unknown }>,
  workload: string,
  o: { cluster?: string; timeout?: number } = {},
): Promise<void> {
  const all = Array.isArray(services) ? services : [services];
  await waitFor(
    async () => {
      const seen: unknown[] = [];
      for (const svc of all) {
        const s = engineOf(await engineStatus(svc).catch(() => ({ leader: false })), o.cluster);
        if (!s.leader) continue;
        const busy = [
          ...(s.running ?? []).filter((r) => r.workload === workload).map(() => 'running'),
          ...(s.waiting ?? []).filter((w) => w.workload === workload).map((w) => w.why),
        ];
        if (busy.length === 0) return true;
        seen.push(busy);
      }
      return pending(seen.length > 0 ? seen : 'no leader');
    },
    {
      describe: `nothing under way for ${workload}${o.cluster ? ` in ${o.cluster}` : ''}`,
      timeout: o.timeout ?? 60_000,
    },
  );
}

/**
 * Expects the leading service to hold `workload`'s change and do nothing else for it now: its status
 * lists the workload only as waiting for `why` (default: an Argo CD or Flux sync to end), with no
 * reload running, queued or debouncing. Read once: a gate holds (and releases) as it decides, so after
 * the decision the status is what it decided.
 */
export async function expectHeld(
  svc: Logged & { status?: () => unknown },
  workload: string,
  why = 'sync-hold',
): Promise<void> {
  const s = await engineStatus(svc);
  const mine = [
    ...(s.running ?? []).filter((r) => r.workload === workload).map(() => 'running'),
    ...(s.waiting ?? []).filter((w) => w.workload === workload).map((w) => w.why),
  ];
  if (!s.leader || mine.length === 0 || mine.some((m) => m !== why))
    throw new Error(
      `expected ${workload} held (${why}) and nothing else, but the status says ${JSON.stringify(mine)} (leader: ${s.leader})`,
    );
}
