// Chat alerts with Stakater Reloader's variables (ALERT_ON_RELOAD, ALERT_WEBHOOK_URL, ALERT_SINK,
// ALERT_WEBHOOK_PROXY, ALERT_ADDITIONAL_INFO), on the real control plane: a config change reloads the
// workload and a real https receiver on loopback gets Reloader's Slack body, through a real proxy on
// loopback (a CONNECT tunnel); a receiver answering 500, then one that is gone, does not stop or
// delay the next reload, and each failure is logged with the webhook's origin only. (The http-through-
// proxy path, proxy credentials and the timeout are service/alerts/sender.test.ts.) Measured alone:
// 2.3 s on a quiet machine (two workloads), 11-18 s at a load average of 12 (three).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { generatePki } from '../cluster/pki.ts';
import { startHttpProxy } from '../support/http-proxy.ts';
import { it } from '../support/kube.ts';
import { waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const cleanup: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  await killAll();
  await Promise.all(cleanup.splice(0).map((c) => c()));
});

describe('chat alerts (ALERT_* variables)', () => {
  it("sends Reloader's Slack body through the proxy; a refused or unsent alert never holds a reload", async ({
    kube,
    namespace,
  }) => {
    // A receiver on https (a CA of its own, trusted by the service through NODE_EXTRA_CA_CERTS).
    const pki = await generatePki(await mkdtemp(path.join(tmpdir(), 'gr-alert-ca-')), []);
    cleanup.push(() => rm(pki.dir, { recursive: true, force: true }));
    let status = 200;
    const got: { url: string; type: string | undefined; body: string }[] = [];
    const receiver = createServer(
      { cert: await readFile(pki.serverCert), key: await readFile(pki.serverKey) },
      (req, res) => {
        let body = '';
        req.on('data', (d: Buffer) => {
          body += d.toString();
        });
        req.on('end', () => {
          got.push({ url: req.url ?? '', type: req.headers['content-type'], body });
          res.writeHead(status).end();
        });
      },
    );
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    cleanup.push(async () => {
      if (receiver.listening) receiver.close();
      receiver.closeAllConnections();
    });
    const origin = `https://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const proxy = await startHttpProxy();
    cleanup.push(proxy.close);

    for (const name of ['a', 'b', 'c']) {
      await kube.core.createNamespacedConfigMap({ namespace, body: configMap(name, { k: '1' }) });
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(`web-${name}`, {
          annotations: { 'reloader.stakater.com/auto': 'true' },
          container: { envFrom: [{ configMapRef: { name } }] },
        }),
      });
    }
    const before = {
      a: await waitReadyPods(kube, namespace, 'web-a', 1),
      b: await waitReadyPods(kube, namespace, 'web-b', 1),
      c: await waitReadyPods(kube, namespace, 'web-c', 1),
    };
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']), {
      ALERT_ON_RELOAD: 'true',
      ALERT_SINK: 'slack',
      ALERT_WEBHOOK_URL: `${origin}/services/T0/B0/s3cr3t-t0ken`,
      ALERT_WEBHOOK_PROXY: proxy.url,
      ALERT_ADDITIONAL_INFO: 'cluster test',
      NODE_EXTRA_CA_CERTS: pki.caCert,
    });
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);

    await kube.core.replaceNamespacedConfigMap({ name: 'a', namespace, body: configMap('a', { k: '2' }) });
    await waitAllReplaced(kube, namespace, 'web-a', before.a, 1);
    await svc.waitForLog('alert sent', (l) => l.msg === 'alert sent', 20_000);
    expect(got).toEqual([
      {
        url: '/services/T0/B0/s3cr3t-t0ken',
        type: 'application/json',
        body: JSON.stringify({
          attachments: [
            {
              color: 'good',
              author_name: 'Reloader',
              text: `cluster test : Reloader detected changes in *a* of type *CONFIGMAP* in namespace *${namespace}*. Hence reloaded *web-a* of type *Deployment* in namespace *${namespace}*`,
            },
          ],
        }),
      },
    ]);
    expect(proxy.seen).toEqual([`CONNECT ${origin.slice('https://'.length)}`]);

    // The receiver now refuses: the reload still happens, and the refusal is logged.
    status = 500;
    await kube.core.replaceNamespacedConfigMap({ name: 'b', namespace, body: configMap('b', { k: '2' }) });
    await waitAllReplaced(kube, namespace, 'web-b', before.b, 1);
    await waitForEvent(kube, namespace, 'Reloaded', 'web-b');
    const refused = await svc.waitForLog(
      'alert refused',
      (l) => l.msg === 'alert not accepted: HTTP 500',
      20_000,
    );
    expect(refused).toMatchObject({ alertSink: 'slack', alertWebhook: origin, workload: 'Deployment/web-b' });
    await waitFor(() => (got.length === 2 ? true : pending(got.length)), { describe: 'the second alert' });

    // The receiver is gone: the reload still happens, and the failure is logged.
    // Stops listening at once; its open connections are closed too (not waited for).
    receiver.close();
    receiver.closeAllConnections();
    await kube.core.replaceNamespacedConfigMap({ name: 'c', namespace, body: configMap('c', { k: '2' }) });
    await waitAllReplaced(kube, namespace, 'web-c', before.c, 1);
    const unsent = await svc.waitForLog('alert not sent', (l) => l.msg === 'alert not sent', 20_000);
    expect(unsent).toMatchObject({ alertWebhook: origin, workload: 'Deployment/web-c' });
    // The webhook's path is its secret: no log line shows it.
    expect(svc.logs.filter((l) => JSON.stringify(l).includes('s3cr3t-t0ken'))).toEqual([]);
  });
});
