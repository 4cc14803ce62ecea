#!/usr/bin/env node
import { WEBHOOK_PATH } from './argocd/webhook.ts';
import { buildInfo } from './build-info.ts';
// gitops-reloader: `serve` runs the service; `plan` shows what a config change would reload.
import { loadConfig, serveFlags } from './config/config.ts';
import { FlagError, usage } from './config/flags.ts';
import { reloaderFlags } from './config/reloader-flags.ts';
import { countResponses, startHttpServer } from './http.ts';
import { serveHub } from './hub/hub.ts';
import { loadClusterAccess, observedAccess } from './kube/access.ts';
import { h2Sessions } from './kube/h2-sessions.ts';
import { createLogger } from './log.ts';
import { Metrics } from './metrics.ts';
import { serve } from './serve.ts';
import { startStatusServer } from './status-server.ts';

// The other commands are imported when run: `serve` never loads the git writer, the YAML parser or the
// migration code (bench/README.md, "Where the memory goes").
const COMMANDS = [
  'serve',
  'status',
  'resume',
  'plan',
  'checksum',
  'tenant-key',
  'migrate',
  'version',
  'help',
] as const;
type Command = (typeof COMMANDS)[number];

const SYNOPSIS: Record<Command, string> = {
  serve: 'gitops-reloader serve [flags]',
  status: 'gitops-reloader status [--url URL] [--output text|json]',
  resume: 'gitops-reloader resume (configmap|secret)/NAMESPACE/NAME [--kubeconfig PATH]',
  plan: 'gitops-reloader plan --namespace N (--configmap NAME | --secret NAME) [--kubeconfig PATH]',
  checksum: 'gitops-reloader checksum [DIR|-] [--in-place] [--check] [--key-file F | --namespace-key-file F]',
  'tenant-key': 'gitops-reloader tenant-key --namespace NS [--key-file F] [--secret NAME]',
  migrate:
    'gitops-reloader migrate (--values FILE | --deployment NAMESPACE/NAME) [--namespace N] [--kubeconfig PATH]',
  version: 'gitops-reloader version',
  help: 'gitops-reloader help [COMMAND]',
};

/** One command's usage and flags, for `<command> --help`. */
async function commandHelp(cmd: Command): Promise<string> {
  switch (cmd) {
    case 'serve':
      return `Runs the service.\n\nUsage:\n  ${SYNOPSIS.serve}\n\nFlags:\n${usage(serveFlags)}

serve also accepts Stakater Reloader's flags under their own names, for migration:
${usage(reloaderFlags)}
`;
    case 'plan': {
      const { planFlags } = await import('./plan-command.ts');
      return `Shows which workloads a change to one ConfigMap or Secret would reload, and how. Writes nothing.

Usage:\n  ${SYNOPSIS.plan}\n\nFlags:\n${usage(planFlags)}\n`;
    }
    case 'checksum':
      return (await import('../git/checksum-command.ts')).CHECKSUM_USAGE;
    case 'status':
      return (await import('./status-command.ts')).STATUS_USAGE;
    case 'resume':
      return (await import('./resume-command.ts')).RESUME_USAGE;
    case 'tenant-key':
      return (await import('./tenant-key-command.ts')).TENANT_KEY_USAGE;
    case 'migrate': {
      const { migrateFlags } = await import('./migrate/migrate-command.ts');
      return `Prints gitops-reloader chart values for a Stakater Reloader installation, with a comment
on each value that changes meaning; exits 3 when something cannot be carried over.

Usage:\n  ${SYNOPSIS.migrate}\n\nFlags:\n${usage(migrateFlags)}\n`;
    }
    case 'version':
      return `Prints the version, the git commit and the Node.js version.\n\nUsage:\n  ${SYNOPSIS.version}\n  gitops-reloader --version\n`;
    case 'help':
      return help();
  }
}

function help(): string {
  return `gitops-reloader: reloads workloads when their ConfigMaps or Secrets change, once per sync,
without writing the pod template.

Usage:
${COMMANDS.map((c) => `  ${SYNOPSIS[c]}`).join('\n')}

Run 'gitops-reloader COMMAND --help' for a command's flags.
`;
}

function versionText(): string {
  const b = buildInfo();
  return `gitops-reloader ${b.version}\ncommit: ${b.commit}\nnode: ${b.node}\n`;
}

function isCommand(s: string | undefined): s is Command {
  return (COMMANDS as readonly string[]).includes(s ?? '');
}

/** -h or --help among the flags (before a `--`). */
function asksHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((a) => a === '-h' || a === '--help');
}

async function runServe(argv: string[]): Promise<number> {
  const cfg = loadConfig(argv, process.env);
  const log = createLogger(cfg.logLevel, undefined, cfg.logFormat);
  for (const note of cfg.reloaderNotes) log.info({ flag: note }, 'Stakater Reloader flag translated');
  const metrics = new Metrics({ ...buildInfo(), countByNamespace: cfg.metricsCountByNamespace });
  const kc = observedAccess(await loadClusterAccess(cfg.kubeconfig), (method, host, code, seconds) =>
    metrics.reloader.apiRequest(method, host, code, seconds),
  );
  // Every watch of one API server on one HTTP/2 connection, unless turned off (docs/adr/0046).
  h2Sessions.enabled = cfg.watchHttp2;
  const svc = cfg.hub ? await serveHub(cfg, kc, log, metrics) : await serve(cfg, kc, log, metrics);
  const http = await startHttpServer({
    address: cfg.httpAddress,
    metrics: svc.metrics ?? metrics,
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
  if (svc.fluxWebhook) http.routes.use(svc.fluxWebhook);
  log.info({ url: http.url }, 'http listening');
  // The status of the engine, on its own address: loopback by default, reached by port-forward.
  // Not reaching it costs the status, never the service: a taken port is logged, and serving goes on.
  const statusServer = cfg.statusAddress
    ? await startStatusServer(cfg.statusAddress, () => svc.status(), log).catch((err: Error) => {
        log.error({ address: cfg.statusAddress, err: err.message }, 'status endpoint not started');
        return undefined;
      })
    : undefined;
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    http.drain();
    void svc
      .stop()
      .then(() => {
        h2Sessions.closeAll();
        return Promise.all([http.close(), statusServer?.close()]);
      })
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

/** A FlagError as one sentence naming the command, and where to find its flags. */
function flagErrorText(cmd: string | undefined, message: string): string {
  const which = isCommand(cmd) ? ` ${cmd}` : '';
  const sentence = /[.!?]$/.test(message) ? message : `${message}.`;
  return `gitops-reloader${which}: ${sentence} Run 'gitops-reloader${which} --help' for usage.\n`;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (isCommand(cmd) && cmd !== 'help' && asksHelp(rest)) {
    process.stdout.write(await commandHelp(cmd));
    return 0;
  }
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
    case 'status': {
      const { status } = await import('./status-command.ts');
      return status(
        rest,
        process.env,
        (s) => process.stdout.write(s),
        (s) => process.stderr.write(s),
      );
    }
    case 'resume': {
      const { resume } = await import('./resume-command.ts');
      return resume(
        rest,
        process.env,
        (s) => process.stdout.write(s),
        (s) => process.stderr.write(s),
      );
    }
    case 'tenant-key': {
      const { tenantKey } = await import('./tenant-key-command.ts');
      return tenantKey(
        rest,
        process.env,
        (s) => process.stdout.write(s),
        (s) => process.stderr.write(s),
      );
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
    case 'version':
    case '--version':
      if (rest.length > 0) throw new FlagError(`version takes no arguments, got ${rest.join(' ')}`);
      process.stdout.write(versionText());
      return 0;
    case 'help': {
      const about = rest[0];
      if (about !== undefined && !isCommand(about)) {
        throw new FlagError(
          `unknown command ${JSON.stringify(about)}; the commands are ${COMMANDS.join(', ')}`,
        );
      }
      process.stdout.write(about === undefined ? help() : await commandHelp(about));
      return 0;
    }
    case '--help':
    case '-h':
      process.stdout.write(help());
      return 0;
    case undefined:
      process.stderr.write(`gitops-reloader: a command is needed.\n\n${help()}`);
      return 2;
    default:
      process.stderr.write(
        `gitops-reloader: unknown command ${JSON.stringify(cmd)}; the commands are ${COMMANDS.join(', ')}.\n\n${help()}`,
      );
      return 2;
  }
}

const command = process.argv[2];
main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    if (err instanceof FlagError) process.stderr.write(flagErrorText(command, err.message));
    else
      process.stderr.write(
        `gitops-reloader: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
    process.exit(err instanceof FlagError ? 2 : 1);
  },
);
