// npm run demo: gitops-reloader end to end with the real Argo CD, in about a minute once built.
// Starts the control plane with Argo CD (test/cluster), pushes examples/demo to a local git
// repository, lets Argo CD sync it, starts the service, commits a change to the app's ConfigMap and
// Secret, and shows Argo CD's sync and the pods being replaced live, then sums up. Cleans up on exit
// or Ctrl-C.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { ensureBinaries } from '../test/cluster/build.ts';
import { down, status, up } from '../test/cluster/control-plane.ts';
import { clusterPaths, repoRoot } from '../test/cluster/paths.ts';
import { requirePrerequisites } from '../test/cluster/prerequisites.ts';

const NS = 'demo-shop';
const RELEASE_NS = 'gitops-reloader';
const say = (msg: string) => process.stdout.write(`${msg}\n`);
const dim = (s: string) => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s);
const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

const cleanups: Array<() => Promise<unknown>> = [];
let cleaning: Promise<void> | undefined;
function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  })();
  return cleaning;
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    say(`\n${sig}: cleaning up…`);
    void cleanUp().then(() => process.exit(130));
  });
}

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await pause(200);
  }
}

interface PodLine {
  uid: string;
  name: string;
  ready: boolean;
  surge: boolean;
}

async function pods(core: CoreV1Api): Promise<PodLine[]> {
  const list = await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=web' });
  return list.items
    .filter((p) => !p.metadata?.deletionTimestamp)
    .map((p) => ({
      uid: p.metadata?.uid ?? '',
      name: p.metadata?.name ?? '',
      ready: Boolean(p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
      surge: p.metadata?.labels?.['gitops-reloader.io/surge'] !== undefined,
    }));
}

const run = promisify(execFile);

/** git with no user or system config, as the demo's "person" committing to the app's repository. */
async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', args, {
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: cwd,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 'Demo Person',
      GIT_AUTHOR_EMAIL: 'demo@example.com',
      GIT_COMMITTER_NAME: 'Demo Person',
      GIT_COMMITTER_EMAIL: 'demo@example.com',
    },
  });
  return stdout.trim();
}

interface AppView {
  phase?: string;
  sync?: string;
  health?: string;
  revision?: string;
  startedAt?: string;
  finishedAt?: string;
}

async function main(): Promise<void> {
  const started = Date.now();
  const paths = clusterPaths();
  say(bold('gitops-reloader demo'));
  // Everything the machine must provide, checked in seconds, before a build that can take half an hour.
  await requirePrerequisites(paths);
  say(
    '1/6 control plane and Argo CD (real kube-apiserver, etcd, controllers, Argo CD v3.6; kwok plays the nodes)',
  );
  const built = await ensureBinaries(paths, (m) => say(dim(`    ${m}`)));
  if (built.built) say(dim(`    built in ${built.seconds.toFixed(0)}s`));
  let state = (await status(paths)).state;
  if ((await status(paths)).running && !state?.argocd) {
    // A control plane started without Argo CD (npm run bench): Argo CD is started next to it.
    state = (await up(paths, (m) => say(dim(`    ${m}`)))).state;
  } else if (!(await status(paths)).running) {
    if (state) await down(paths);
    const r = await up(paths, (m) => say(dim(`    ${m}`)));
    state = r.state;
    cleanups.push(() => down(paths));
    say(dim(`    up in ${r.seconds.toFixed(1)}s`));
  } else {
    say(dim('    reusing the running control plane and Argo CD'));
  }
  const argocd = state?.argocd;
  if (!argocd) throw new Error('Argo CD did not start');
  const kc = new KubeConfig();
  kc.loadFromFile(paths.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const appRef = {
    group: 'argoproj.io',
    version: 'v1alpha1',
    namespace: argocd.namespace,
    plural: 'applications',
    name: 'shop',
  };
  const readApp = async (): Promise<AppView> => {
    const a = (await custom.getNamespacedCustomObject(appRef)) as {
      status?: {
        sync?: { status?: string; revision?: string };
        health?: { status?: string };
        operationState?: {
          phase?: string;
          startedAt?: string;
          finishedAt?: string;
          syncResult?: { revision?: string };
        };
      };
    };
    const s = a.status;
    return {
      ...(s?.operationState?.phase ? { phase: s.operationState.phase } : {}),
      ...(s?.sync?.status ? { sync: s.sync.status } : {}),
      ...(s?.health?.status ? { health: s.health.status } : {}),
      ...(s?.operationState?.syncResult?.revision ? { revision: s.operationState.syncResult.revision } : {}),
      ...(s?.operationState?.startedAt ? { startedAt: s.operationState.startedAt } : {}),
      ...(s?.operationState?.finishedAt ? { finishedAt: s.operationState.finishedAt } : {}),
    };
  };
  const refresh = () =>
    custom.patchNamespacedCustomObject(
      { ...appRef, body: { metadata: { annotations: { 'argocd.argoproj.io/refresh': 'hard' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  const syncedAt = (sha: string) =>
    until(
      `Argo CD to sync ${sha.slice(0, 7)}`,
      async () => {
        const v = await readApp();
        return v.revision === sha && v.phase === 'Succeeded' && v.sync === 'Synced' && v.health === 'Healthy'
          ? v
          : undefined;
      },
      120_000,
    );

  say(`2/6 push examples/demo to ${argocd.git}/demo-shop.git and let Argo CD sync it`);
  await custom.deleteNamespacedCustomObject(appRef).catch(() => undefined);
  for (const ns of [NS, RELEASE_NS]) {
    // Start clean: a namespace left by an earlier run is deleted (and awaited) first.
    await core.deleteNamespace({ name: ns }).catch(() => undefined);
    await until(`namespace ${ns} from an earlier run to be gone`, () =>
      core.readNamespace({ name: ns }).then(
        () => undefined,
        (e: { code?: number }) => (e.code === 404 ? true : undefined),
      ),
    );
  }
  await core.createNamespace({ body: { metadata: { name: RELEASE_NS } } });
  cleanups.push(() => core.deleteNamespace({ name: RELEASE_NS }));
  const bare = path.join(argocd.gitRoot, 'demo-shop.git');
  await rm(bare, { recursive: true, force: true });
  await git(argocd.gitRoot, 'init', '--quiet', '--bare', '--initial-branch=main', bare);
  cleanups.push(() => rm(bare, { recursive: true, force: true }));
  const work = await mkdtemp(path.join(tmpdir(), 'gr-demo-repo-'));
  cleanups.push(() => rm(work, { recursive: true, force: true }));
  await git(work, 'init', '--quiet', '--initial-branch=main');
  await mkdir(path.join(work, 'apps', 'web'), { recursive: true });
  const appYaml = path.join(work, 'apps', 'web', 'app.yaml');
  const source = await readFile(path.join(repoRoot, 'examples', 'demo', 'app.yaml'), 'utf8');
  await writeFile(appYaml, source);
  await git(work, 'add', '-A');
  await git(work, 'commit', '--quiet', '-m', 'Deploy the shop web app');
  await git(work, 'push', '--quiet', bare, 'HEAD:refs/heads/main');
  const first = await git(work, 'rev-parse', 'HEAD');
  const app = parseYaml(
    await readFile(path.join(repoRoot, 'examples', 'demo', 'application.yaml'), 'utf8'),
  ) as {
    spec: { source: { repoURL: string } };
  };
  app.spec.source.repoURL = `${argocd.git}/demo-shop.git`;
  await custom.createNamespacedCustomObject({ ...appRef, body: app });
  cleanups.push(async () => {
    await custom.deleteNamespacedCustomObject(appRef);
    await core.deleteNamespace({ name: NS });
  });
  await syncedAt(first);
  const before = await until('3 Ready pods', async () => {
    const p = await pods(core);
    return p.length === 3 && p.every((x) => x.ready) ? p : undefined;
  });
  const deploymentBefore = await apps.readNamespacedDeployment({ name: 'web', namespace: NS });
  const genBefore = deploymentBefore.metadata?.generation;
  const templateBefore = JSON.stringify(deploymentBefore.spec?.template);
  say(
    dim(
      `    Argo CD synced ${first.slice(0, 7)}: Synced, Healthy; 3/3 Ready: ${before.map((p) => p.name).join(', ')}`,
    ),
  );

  say('3/6 start gitops-reloader serve');
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-demo-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const keyFile = path.join(dir, 'hash.key');
  await writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
  const svc: ChildProcess = spawn(
    process.execPath,
    [
      path.join(repoRoot, 'service', 'cli.ts'),
      'serve',
      `--kubeconfig=${paths.kubeconfig}`,
      `--release-namespace=${RELEASE_NS}`,
      `--hash-key-file=${keyFile}`,
      '--http-address=127.0.0.1:0',
      `--argocd-namespaces=${argocd.namespace}`,
      '--debounce=1s',
      `--namespaces=${NS}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  cleanups.push(async () => {
    svc.kill('SIGTERM');
    await new Promise((r) => svc.once('exit', r));
  });
  const logs: Array<Record<string, unknown>> = [];
  let errText = '';
  svc.stderr?.on('data', (d: Buffer) => {
    errText += d.toString();
  });
  let buf = '';
  svc.stdout?.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      try {
        logs.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
      } catch {
        // not a log line
      }
      buf = buf.slice(i + 1);
    }
  });
  const url = await until('the service to be ready', async () => {
    if (svc.exitCode !== null) throw new Error(`the service exited: ${errText}`);
    const http = logs.find((l) => l.msg === 'http listening');
    return logs.some((l) => l.msg === 'ready') && http ? String(http.url) : undefined;
  });
  say(dim(`    ready; metrics at ${url}/metrics; baseline recorded, nothing restarted`));

  say('4/6 commit a change to the ConfigMap and the Secret; Argo CD syncs it');
  const docs = parseAllDocuments(source);
  for (const d of docs) {
    const name = d.getIn(['metadata', 'name']);
    if (name === 'web-config') d.setIn(['data', 'app.properties'], 'greeting=hello\nfeature.checkout=true\n');
    if (name === 'web-secret') d.setIn(['stringData', 'api-token'], 'demo-token-v2');
  }
  await writeFile(appYaml, docs.map((d) => d.toString()).join('---\n'));
  await git(work, 'commit', '--quiet', '-am', 'Turn on checkout and rotate the API token');
  await git(work, 'push', '--quiet', bare, 'HEAD:refs/heads/main');
  const second = await git(work, 'rev-parse', 'HEAD');
  say(
    dim(
      `    committed ${second.slice(0, 7)}: web-config (feature.checkout=true) and web-secret (api-token rotated)`,
    ),
  );
  await refresh();
  const syncEnd = await until(
    `Argo CD's sync of ${second.slice(0, 7)} to end`,
    async () => {
      const v = await readApp();
      return v.revision === second && v.phase === 'Succeeded' ? v : undefined;
    },
    120_000,
  );
  const unchangedDuringSync = (await pods(core)).filter((p) => before.some((b) => b.uid === p.uid)).length;
  say(
    dim(
      `    Argo CD sync ${syncEnd.startedAt} → ${syncEnd.finishedAt}: Succeeded; ${unchangedDuringSync}/3 old pods still serving (changes held until the sync ended)`,
    ),
  );
  const syncEndMs = Date.now();

  say('5/6 reload: each old pod replaced once, Ready count shown live');
  let last = '';
  const old = new Set(before.map((p) => p.uid));
  await until(
    'every pod replaced',
    async () => {
      const p = await pods(core);
      const line = `    t+${((Date.now() - syncEndMs) / 1000).toFixed(1).padStart(4)}s  Ready ${p.filter((x) => x.ready).length} (want ≥3)  old ${p.filter((x) => old.has(x.uid)).length}  new ${p.filter((x) => !old.has(x.uid) && !x.surge).length}  surge ${p.filter((x) => x.surge).length}`;
      const key = line.replace(/t\+\s*[\d.]+s/, '');
      if (key !== last) {
        say(line);
        last = key;
      }
      return p.length === 3 && p.every((x) => x.ready && !old.has(x.uid) && !x.surge) ? p : undefined;
    },
    120_000,
  );
  const tookS = (Date.now() - syncEndMs) / 1000;
  await refresh();
  const finalApp = await syncedAt(second);

  say('6/6 summary');
  const after = await pods(core);
  const deploymentAfter = await apps.readNamespacedDeployment({ name: 'web', namespace: NS });
  const genAfter = deploymentAfter.metadata?.generation;
  const templateSame = JSON.stringify(deploymentAfter.spec?.template) === templateBefore;
  const reloaded = (await core.listNamespacedEvent({ namespace: NS })).items.filter(
    (e) => e.reason === 'Reloaded',
  );
  const metrics = await (await fetch(`${url}/metrics`)).text();
  say(`    pods replaced:      ${after.length} of ${before.length} (${after.map((p) => p.name).join(', ')})`);
  say(`    reloads:            ${reloaded.length} for one Argo CD sync that changed 2 configs`);
  say(
    `    pod template:       ${templateSame ? 'unchanged' : 'CHANGED'} — generation ${genBefore} before, ${genAfter} after`,
  );
  say(`    Argo CD:            ${finalApp.sync}, ${finalApp.health} at ${second.slice(0, 7)}`);
  say(
    `    time after sync:    ${tookS.toFixed(1)}s (total demo ${((Date.now() - started) / 1000).toFixed(0)}s)`,
  );
  say(`    Event:              ${reloaded[0]?.message ?? '(none)'}`);
  say('    /metrics excerpt:');
  const shown =
    /^(reloader_reload_executed_total|gitops_reloader_reloads_total|gitops_reloader_pods_replaced_total|gitops_reloader_leader)/;
  for (const line of metrics.split('\n')) {
    if (shown.test(line) && !/ 0$/.test(line)) {
      say(dim(`      ${line}`));
    }
  }
}

main()
  .then(() => cleanUp())
  .then(
    () => process.exit(0),
    async (err: unknown) => {
      process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
      await cleanUp();
      process.exit(1);
    },
  );
