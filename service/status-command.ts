// `gitops-reloader status`: what the leader's engine is doing, read from its status endpoint
// (--status-address, loopback by default: `kubectl port-forward` to the leader's pod reaches it):
// reloads running, waiting and why, changes halted, the last reloads done and why (docs/progressive-reloads.md).

import { FlagError, type FlagSpec, parseFlags, usage } from './config/flags.ts';
import { formatStatus, type ReloadStatus } from './engine/status.ts';
import type { HubStatus } from './serve.ts';

export const statusFlags: readonly FlagSpec[] = [
  {
    name: 'url',
    type: 'string',
    default: 'http://127.0.0.1:8081/status',
    help: "The leader's status endpoint (serve --status-address), e.g. through kubectl port-forward.",
  },
  { name: 'output', type: 'enum', values: ['text', 'json'], default: 'text', help: 'text or json.' },
  { name: 'timeout', type: 'duration', default: '5s', min: 1, help: 'How long to wait for the answer.' },
];

export const STATUS_USAGE = `Usage: gitops-reloader status [--url URL] [--output text|json]

Prints what the leader is doing: reloads running, waiting (and why: debounce, sync-hold, queue,
retry, window, wave, halt, brake, budget, pdb), config changes halted by progressive reloads (and
the pods that failed), and the last reloads done with their cause (configs, keys, Argo CD sync).

  kubectl -n gitops-reloader port-forward deploy/gitops-reloader 8081 &
  gitops-reloader status

${usage(statusFlags)}
`;

export async function status(
  argv: string[],
  env: NodeJS.ProcessEnv,
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const { values: v, positionals } = parseFlags(statusFlags, argv, env);
  if (positionals.length > 0) throw new FlagError(`status takes no arguments, got ${positionals.join(' ')}`);
  const url = v.url as string;
  // The operator's own endpoint, not a URL that decides authority: fetch reads it as it is.
  if (!(url.startsWith('http://') || url.startsWith('https://')) || /\s/.test(url))
    throw new FlagError(`invalid value ${JSON.stringify(url)} for --url: expected http:// or https://`);
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(v.timeout as number) });
  } catch (e) {
    err(`gitops-reloader status: could not reach ${url}: ${(e as Error).message}\n`);
    return 1;
  }
  if (!res.ok) {
    err(`gitops-reloader status: ${url} answered HTTP ${res.status}\n`);
    return 1;
  }
  const body = (await res.json()) as ReloadStatus | { leader: false } | HubStatus;
  if (v.output === 'json') out(`${JSON.stringify(body, null, 2)}\n`);
  else if ('hub' in body) out(formatHubStatus(body));
  else out(formatStatus(body));
  return 0;
}

/** Hub mode: each served cluster's engine, as this replica sees it (docs/hub-mode.md). */
export function formatHubStatus(h: HubStatus): string {
  const clusters = Object.entries(h.clusters).sort(
    ([a, x], [b, y]) => x.name.localeCompare(y.name) || a.localeCompare(b),
  );
  if (clusters.length === 0) return 'hub mode: no cluster served\n';
  return clusters
    .map(([id, c]) => {
      const s = c as unknown as ReloadStatus | { leader: false } | { starting: true; held?: string };
      const body =
        'starting' in s
          ? s.held
            ? `held: its credentials are refused (${s.held})\n`
            : 'starting: waiting for the cluster to answer\n'
          : formatStatus(s);
      return `== cluster ${c.name || c.server} (${c.server}, id ${id})\n${body}`;
    })
    .join('\n');
}
