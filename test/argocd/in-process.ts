// Runs the service in this process (serve() from service/serve.ts) so a test can give it any
// KubeConfig (e.g. a ServiceAccount's, to deny it Applications) and serve its Argo CD webhook router
// on 127.0.0.1 — the service's own HTTP server does not mount it yet.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import express from 'express';
import { WEBHOOK_PATH } from '../../service/argocd/webhook.ts';
import { loadConfig } from '../../service/config/config.ts';
import { createLogger } from '../../service/log.ts';
import { serve } from '../../service/serve.ts';
import type { LogLine } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';

export interface InProcessService {
  logs: LogLine[];
  /** The webhook's URL on 127.0.0.1. */
  webhookUrl: string;
  waitForLog(what: string, match: (l: LogLine) => boolean, timeout?: number): Promise<LogLine>;
  /** What the engine does now, as --status-address serves it (engine/status.ts). */
  status(): unknown;
  stop(): Promise<void>;
}

export async function startInProcess(kc: KubeConfig, args: string[]): Promise<InProcessService> {
  const logs: LogLine[] = [];
  let buf = '';
  const sink = new Writable({
    write(chunk, _enc, done) {
      buf += chunk.toString();
      let i = buf.indexOf('\n');
      while (i >= 0) {
        const line = buf.slice(0, i);
        try {
          logs.push(JSON.parse(line) as LogLine);
        } catch {
          logs.push({ level: 'text', msg: line });
        }
        buf = buf.slice(i + 1);
        i = buf.indexOf('\n');
      }
      done();
    },
  });
  const cfg = loadConfig(args, {});
  const svc = await serve(cfg, kc, createLogger('debug', sink));
  await svc.ready;
  // With leader election, `ready` means caches synced; changes are acted on once this replica leads.
  await waitFor(() => logs.find((l) => l.msg === 'ready') ?? pending(logs.slice(-3).map((l) => l.msg)), {
    describe: 'the service acting (log: ready)',
  });
  if (!svc.argocdWebhook) throw new Error('the service has no webhook router: pass --webhook-token-file');
  const app = express();
  app.use(svc.argocdWebhook);
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    logs,
    webhookUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}${WEBHOOK_PATH}`,
    waitForLog: (what, match, timeout = 30_000) =>
      waitFor(() => logs.find(match) ?? pending(logs.slice(-5).map((l) => l.msg)), {
        describe: `log: ${what}`,
        timeout,
      }),
    status: () => svc.status(),
    stop: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await svc.stop();
    },
  };
}
