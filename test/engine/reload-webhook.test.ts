// --webhook-url (Stakater Reloader's flag): a config change POSTs the reload's details to a real
// HTTP server on loopback, signed, and no pod is restarted; a failing webhook is retried, reported
// with a ReloadFailed Event, and delivered once it recovers.
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { SIGNATURE_HEADER, signature } from '../../service/strategies/reload-webhook.ts';
import { it, type Kube } from '../support/kube.ts';
import { events, livePods, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const servers: Server[] = [];
afterEach(async () => {
  await killAll();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

interface Received {
  body: string;
  signature: string | undefined;
}

/** A webhook receiver on loopback that answers with `codes` in turn (the last one repeats). */
async function receiver(codes: number[]): Promise<{ url: string; got: Received[] }> {
  const got: Received[] = [];
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => {
      body += d.toString();
    });
    req.on('end', () => {
      got.push({ body, signature: req.headers[SIGNATURE_HEADER.toLowerCase()] as string | undefined });
      res.writeHead(codes[Math.min(got.length - 1, codes.length - 1)] as number).end();
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/reloads?token=t`, got };
}

async function app(kube: Kube, namespace: string) {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('web', {
      annotations: { 'reloader.stakater.com/auto': 'true' },
      container: { envFrom: [{ configMapRef: { name: 'app' } }] },
    }),
  });
  return waitReadyPods(kube, namespace, 'web', 1);
}

async function webhookKey(): Promise<{ file: string; key: Buffer }> {
  const key = randomBytes(32);
  const file = path.join(tmpdir(), `gr-webhook-${key.toString('hex').slice(0, 8)}`);
  await writeFile(file, key.toString('hex'), { mode: 0o600 });
  return { file, key: Buffer.from(key.toString('hex'), 'utf8') };
}

describe('--webhook-url', () => {
  it('POSTs a signed notice of the reload instead of restarting the workload', async ({
    kube,
    namespace,
  }) => {
    const before = await app(kube, namespace);
    const hook = await receiver([200]);
    const { file, key } = await webhookKey();
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=0s',
        `--webhook-url=${hook.url}`,
        `--webhook-secret-file=${file}`,
      ]),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });

    const ev = await waitForEvent(kube, namespace, 'ReloadNotified', 'web');
    expect(ev.message).toMatch(
      /ConfigMap\/app changed; sent to the webhook http:\/\/127\.0\.0\.1:\d+\/reloads \(HTTP 200/,
    );
    expect(ev.message).not.toContain('token=t');
    expect(hook.got).toHaveLength(1);
    const [got] = hook.got as [Received];
    expect(got.signature).toBe(`sha256=${signature(key, got.body)}`);
    const body = JSON.parse(got.body) as Record<string, unknown>;
    expect(body).toMatchObject({
      event: 'reload',
      workload: { kind: 'Deployment', namespace, name: 'web' },
      strategy: 'restart',
      changed: ['ConfigMap/app'],
    });
    expect(Date.parse(body.cutoff as string)).toBeGreaterThan(0);
    // Nothing restarted: the same pod serves, and no Reloaded Event.
    const after = await livePods(kube, namespace, 'web');
    expect(after.map((p) => p.uid)).toEqual(before.map((p) => p.uid));
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(0);
  });

  it('retries a failing webhook, reports ReloadFailed, and delivers once it answers', async ({
    kube,
    namespace,
  }) => {
    await app(kube, namespace);
    // Two attempts per reload (one retry): the first reload fails (500, 500); the service's own
    // retry of the reload then gets 500 and finally 200.
    const hook = await receiver([500, 500, 500, 200]);
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=0s',
        `--webhook-url=${hook.url}`,
        '--webhook-retries=1',
        '--webhook-timeout=2s',
      ]),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    const failed = await waitForEvent(kube, namespace, 'ReloadFailed', 'web');
    expect(failed.message).toMatch(
      /webhook http:\/\/127\.0\.0\.1:\d+\/reloads failed after 2 attempts: HTTP 500/,
    );
    await waitForEvent(kube, namespace, 'ReloadNotified', 'web', 90_000);
    await waitFor(() => (hook.got.length === 4 ? true : pending(hook.got.length)), {
      describe: 'four POSTs',
      timeout: 10_000,
    });
    expect(hook.got.every((g) => g.signature === undefined)).toBe(true);
  });
});
