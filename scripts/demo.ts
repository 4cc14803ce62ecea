// npm run demo: gitops-reloader end to end on the local control plane, in about a minute.
// Starts the control plane, deploys examples/demo, starts the service, plays an Argo CD sync that
// changes the app's ConfigMap and Secret, shows the pods being replaced live, and sums up.
// Cleans up on exit or Ctrl-C.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, loadAllYaml } from '@kubernetes/client-node';
import { ensureBinaries } from '../test/cluster/build.ts';
import { down, status, up } from '../test/cluster/control-plane.ts';
import { clusterPaths, repoRoot } from '../test/cluster/paths.ts';
import { ensureCrds, loadCrds } from '../test/support/crds.ts';

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

async function main(): Promise<void> {
  const started = Date.now();
  const paths = clusterPaths();
  say(bold('gitops-reloader demo'));
  say('1/6 control plane (real kube-apiserver, etcd, controllers; kwok plays the nodes)');
  const built = await ensureBinaries(paths, (m) => say(dim(`    ${m}`)));
  if (built.built) say(dim(`    built in ${built.seconds.toFixed(0)}s`));
  if (!(await status(paths)).running) {
    const r = await up(paths, (m) => say(dim(`    ${m}`)));
    cleanups.push(() => down(paths));
    say(dim(`    up in ${r.seconds.toFixed(1)}s`));
  } else {
    say(dim('    reusing the running control plane'));
  }
  const kc = new KubeConfig();
  kc.loadFromFile(paths.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  await ensureCrds(kc, await loadCrds());

  say('2/6 deploy examples/demo: a Deployment using a ConfigMap (subPath + envFrom) and a Secret');
  for (const ns of [NS, RELEASE_NS, 'argocd']) {
    if (ns !== 'argocd') {
      // Start clean: a namespace left by an earlier run is deleted (and awaited) first.
      await core.deleteNamespace({ name: ns }).catch(() => undefined);
      await until(`namespace ${ns} from an earlier run to be gone`, () =>
        core.readNamespace({ name: ns }).then(
          () => undefined,
          (e: { code?: number }) => (e.code === 404 ? true : undefined),
        ),
      );
    }
    await core.createNamespace({ body: { metadata: { name: ns } } }).catch((e: { code?: number }) => {
      if (e.code !== 409) throw e;
    });
    if (ns !== 'argocd') cleanups.push(() => core.deleteNamespace({ name: ns }));
  }
  const objects = loadAllYaml(await readFile(path.join(repoRoot, 'examples', 'demo', 'app.yaml'), 'utf8'));
  for (const o of objects) {
    if (o.kind === 'ConfigMap') await core.createNamespacedConfigMap({ namespace: NS, body: o });
    if (o.kind === 'Secret') await core.createNamespacedSecret({ namespace: NS, body: o });
    if (o.kind === 'Deployment') await apps.createNamespacedDeployment({ namespace: NS, body: o });
  }
  const app = loadAllYaml(
    await readFile(path.join(repoRoot, 'examples', 'demo', 'application.yaml'), 'utf8'),
  )[0];
  await custom
    .deleteNamespacedCustomObject({
      group: 'argoproj.io',
      version: 'v1alpha1',
      namespace: 'argocd',
      plural: 'applications',
      name: 'shop',
    })
    .catch(() => undefined);
  await custom.createNamespacedCustomObject({
    group: 'argoproj.io',
    version: 'v1alpha1',
    namespace: 'argocd',
    plural: 'applications',
    body: app,
  });
  cleanups.push(() =>
    custom.deleteNamespacedCustomObject({
      group: 'argoproj.io',
      version: 'v1alpha1',
      namespace: 'argocd',
      plural: 'applications',
      name: 'shop',
    }),
  );
  const before = await until('3 Ready pods', async () => {
    const p = await pods(core);
    return p.length === 3 && p.every((x) => x.ready) ? p : undefined;
  });
  const genBefore = (await apps.readNamespacedDeployment({ name: 'web', namespace: NS })).metadata
    ?.generation;
  say(dim(`    3/3 Ready: ${before.map((p) => p.name).join(', ')}`));

  say('3/6 start gitops-reloader serve');
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-demo-'));
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
      '--argocd-namespaces=argocd',
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

  say('4/6 play an Argo CD sync: operation Running → change ConfigMap and Secret → Succeeded');
  const appRef = {
    group: 'argoproj.io',
    version: 'v1alpha1',
    namespace: 'argocd',
    plural: 'applications',
    name: 'shop',
  };
  const setPhase = async (phase: string, startedAt: string, extra: Record<string, unknown> = {}) => {
    const cur = (await custom.getNamespacedCustomObject(appRef)) as Record<string, unknown>;
    const operationState = { operation: { sync: { revision: 'b7e1c2d' } }, phase, startedAt, ...extra };
    await custom.replaceNamespacedCustomObject({ ...appRef, body: { ...cur, status: { operationState } } });
  };
  const syncStart = new Date().toISOString();
  await setPhase('Running', syncStart, { message: 'syncing' });
  const cm = await core.readNamespacedConfigMap({ name: 'web-config', namespace: NS });
  await core.replaceNamespacedConfigMap({
    name: 'web-config',
    namespace: NS,
    body: { ...cm, data: { ...cm.data, 'app.properties': 'greeting=hello\nfeature.checkout=true\n' } },
  });
  say(dim('    ConfigMap web-config changed (feature.checkout=true)'));
  await pause(1500);
  const secret = await core.readNamespacedSecret({ name: 'web-secret', namespace: NS });
  await core.replaceNamespacedSecret({
    name: 'web-secret',
    namespace: NS,
    body: { ...secret, data: { 'api-token': Buffer.from('demo-token-v2').toString('base64') } },
  });
  say(dim('    Secret web-secret changed (api-token rotated) — still in the same sync'));
  await pause(2500);
  const unchangedDuringSync = (await pods(core)).every((p) => before.some((b) => b.uid === p.uid));
  say(
    dim(
      `    while the sync ran: ${unchangedDuringSync ? 'no pod touched (changes held)' : 'pods already replaced'}`,
    ),
  );
  const syncEnd = Date.now();
  await setPhase('Succeeded', syncStart, {
    finishedAt: new Date().toISOString(),
    message: 'successfully synced',
  });
  say(dim('    sync Succeeded'));

  say('5/6 reload: each old pod replaced once, Ready count shown live');
  let last = '';
  const old = new Set(before.map((p) => p.uid));
  await until(
    'every pod replaced',
    async () => {
      const p = await pods(core);
      const line = `    t+${((Date.now() - syncEnd) / 1000).toFixed(1).padStart(4)}s  Ready ${p.filter((x) => x.ready).length} (want ≥3)  old ${p.filter((x) => old.has(x.uid)).length}  new ${p.filter((x) => !old.has(x.uid) && !x.surge).length}  surge ${p.filter((x) => x.surge).length}`;
      const key = line.replace(/t\+\s*[\d.]+s/, '');
      if (key !== last) {
        say(line);
        last = key;
      }
      return p.length === 3 && p.every((x) => x.ready && !old.has(x.uid) && !x.surge) ? p : undefined;
    },
    120_000,
  );
  const tookS = (Date.now() - syncEnd) / 1000;

  say('6/6 summary');
  const after = await pods(core);
  const genAfter = (await apps.readNamespacedDeployment({ name: 'web', namespace: NS })).metadata?.generation;
  const reloaded = (await core.listNamespacedEvent({ namespace: NS })).items.filter(
    (e) => e.reason === 'Reloaded',
  );
  const metrics = await (await fetch(`${url}/metrics`)).text();
  say(`    pods replaced:      ${after.length} of ${before.length} (${after.map((p) => p.name).join(', ')})`);
  say(`    reloads:            ${reloaded.length} for one sync that changed 2 configs`);
  say(`    pod template:       unchanged — generation ${genBefore} before, ${genAfter} after`);
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
