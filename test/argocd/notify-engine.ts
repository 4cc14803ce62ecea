// Builds and runs test/argocd/notify: our argocd-notifications-cm snippet evaluated and delivered
// by the real github.com/argoproj/notifications-engine (see notify/main.go).
import { execFile, spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../cluster/paths.ts';

export const notifyDir = path.join(repoRoot, 'test', 'argocd', 'notify');
export const notificationFiles = [
  path.join(repoRoot, 'argocd-plugin', 'notifications', 'argocd-notifications-cm.yaml'),
  path.join(repoRoot, 'argocd-plugin', 'notifications', 'subscriptions-example.yaml'),
];

/** Compiles the harness (Go's build cache makes repeat builds take seconds). */
export async function buildNotify(): Promise<string> {
  const out = path.join(await mkdtemp(path.join(tmpdir(), 'gr-notify-')), 'notify');
  await new Promise<void>((resolve, reject) =>
    execFile(
      'go',
      ['build', '-buildvcs=false', '-trimpath', '-o', out, '.'],
      { cwd: notifyDir, maxBuffer: 16 << 20 },
      (err, _o, errOut) =>
        err ? reject(new Error(`go build in ${notifyDir} failed: ${errOut || err.message}`)) : resolve(),
    ),
  );
  return out;
}

export interface NotifyResult {
  triggered: boolean;
  oncePer?: string;
  alreadySent?: boolean;
  destinations: string[];
  bodies?: Record<string, string>;
  sent: boolean;
  error?: string;
}

/** Feeds successive Application states to the engine; one result per state. */
export async function runNotify(
  bin: string,
  apps: unknown[],
  o: { token?: string; url?: string; send?: boolean } = {},
): Promise<NotifyResult[]> {
  const args = notificationFiles.flatMap((f) => ['-cm', f]);
  if (o.token !== undefined) args.push('-token', o.token);
  if (o.url) args.push('-url', o.url);
  if (o.send) args.push('-send');
  const p = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (err += d.toString()));
  p.stdin.end(apps.map((a) => JSON.stringify(a)).join('\n'));
  const code = await new Promise<number | null>((r) => p.on('close', r));
  if (code !== 0) throw new Error(`notify exited ${code}: ${err}`);
  return out
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as NotifyResult);
}
