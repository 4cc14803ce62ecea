#!/usr/bin/env node
import { existsSync, readFileSync } from 'node:fs';
import { WEBHOOK_PATH } from './argocd/webhook.ts';
// gitops-reloader: `serve` runs the service; `plan` shows what a config change would reload.
import { loadConfig, serveFlags } from './config/config.ts';
import { FlagError, usage } from './config/flags.ts';
import { reloaderFlags } from './config/reloader-flags.ts';
import { countResponses, startHttpServer } from './http.ts';
import { loadClusterAccess, observedAccess } from './kube/access.ts';
import { createLogger } from './log.ts';
import { Metrics } from './metrics.ts';
import { serve } from './serve.ts';

// The other commands are imported when run: `serve` never loads the git writer, the YAML parser or the
// migration code (bench/README.md, "Where the memory goes").
async function help(): Promise<string> {
  const [{ CHECKSUM_USAGE }, { migrateFlags }, { planFlags }] = await Promise.all([
    import('../git/checksum-command.ts'),
    import('./migrate/migrate-command.ts'),
    import('./plan-command.ts'),
  ]);
  return `gitops-reloader: reloads workloads when their ConfigMaps or Secrets change, once per sync,
without writing the pod template.

Usage:
  gitops-reloader serve [flags]
  gitops-reloader plan --namespace N (--configmap NAME | --secret NAME) [--kubeconfig PATH]
  gitops-reloader checksum [DIR|-] [--in-place] [--check] [--key-file F]
  gitops-reloader migrate (--values FILE | --deployment NAMESPACE/NAME) [--namespace N] [--kubeconfig PATH]
  gitops-reloader help

serve flags:
${usage(serveFlags)}

serve also accepts Stakater Reloader's flags under their own names, for migration:
${usage(reloaderFlags)}

plan flags:
${usage(planFlags)}

checksum:
${CHECKSUM_USAGE}

migrate: prints gitops-reloader chart values for a Stakater Reloader installation, with a comment
on each value that changes meaning; exits 3 when something cannot be carried over.
${usage(migrateFlags)}
`;
}

async function runServe(argv: string[]): Promise<number> {
  const cfg = loadConfig(argv, process.env);
  const log = createLogger(cfg.logLevel);
  for (const note of cfg.reloaderNotes) log.info({ flag: note }, 'Stakater Reloader flag translated');
  const metrics = new Metrics({ version: packageVersion(), countByNamespace: cfg.metricsCountByNamespace });
  const kc = observedAccess(await loadClusterAccess(cfg.kubeconfig), (method, host, code, seconds) =>
    metrics.reloader.apiRequest(method, host, code, seconds),
  );
  const svc = await serve(cfg, kc, log, metrics);
  const http = await startHttpServer({
    address: cfg.httpAddress,
    metrics,
    log,
    // Ready: caches synced, and no watch failing for a minute on end (its cache goes stale).
    isReady: () => svc.isSynced() && svc.watchesFailing().length === 0,
    notReadyBecause: () =>
      svc.isSynced()
        ? `watches failing for a minute: ${svc.watchesFailing().join(', ')}`
        : 'caches not synced',
    watchesProgressing: () => svc.watchesProgressing(),
  });
  if (svc.argocdWebhook) {
    // Count only webhook requests; the router carries its full path, so it is mounted at the root.
    http.routes.use(
      WEBHOOK_PATH,
      countResponses((code) => metrics.webhookRequest(code)),
    );
    http.routes.use(svc.argocdWebhook);
  }
  log.info({ url: http.url }, 'http listening');
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    http.drain();
    void svc
      .stop()
      .then(() => http.close())
      .then(
        () => {
          log.info('stopped');
          process.exit(0);
        },
        (err: Error) => {
          log.error({ err: err.message }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  await svc.ready;
  return -1; // keep running
}

function packageVersion(): string {
  try {
    // service/cli.ts from source, dist/service/cli.js when compiled (the image): the first found wins.
    for (const rel of ['../package.json', '../../package.json']) {
      const url = new URL(rel, import.meta.url);
      if (existsSync(url)) {
        return (JSON.parse(readFileSync(url, 'utf8')) as { version?: string }).version ?? 'unknown';
      }
    }
    return 'unknown';
  } catch {
    return 'unknown';
  }
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'serve':
      return runServe(rest);
    case 'plan': {
      const { plan } = await import('./plan-command.ts');
      return plan(rest, process.env, (s) => process.stdout.write(s));
    }
    case 'checksum': {
      const { checksum } = await import('../git/checksum-command.ts');
      return checksum(rest, process.env, (s) => process.stdout.write(s));
    }
    case 'migrate': {
      const { migrate } = await import('./migrate/migrate-command.ts');
      return migrate(
        rest,
        process.env,
        (s) => process.stdout.write(s),
        (s) => process.stderr.write(s),
      );
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(await help());
      return cmd === undefined ? 2 : 0;
    default:
      process.stderr.write(`unknown command ${JSON.stringify(cmd)}\n\n${await help()}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof FlagError) process.stderr.write(`gitops-reloader: ${err.message}\n`);
    else
      process.stderr.write(
        `gitops-reloader: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
    process.exit(err instanceof FlagError ? 2 : 1);
  },
);
