// Start-up memory with Helm release Secrets present (issue 12): N Secrets of type helm.sh/release.v1,
// S KiB each, in one namespace the service watches, plus a handful of ordinary configs. Starts the
// compiled service (as the image runs it) twice: with the default (Helm records left out by a field
// selector) and with --include-helm-release-secrets=true, and prints one JSON object with the RSS of
// each at readiness and the peak sampled during start-up.
//   npm run bench:helm-secrets -- [--count=500] [--kib=500]
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from './cluster.ts';
import { buildService, freePort, ServiceProcess } from './service.ts';

const { values } = parseArgs({
  options: { count: { type: 'string', default: '500' }, kib: { type: 'string', default: '500' } },
});
const count = Number(values.count);
const kib = Number(values.kib);
const say = (m: string) => process.stderr.write(`${m}\n`);

async function measure(args: string[], keyFile: string, kubeconfig: string, namespace: string) {
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-bench-helm-'));
  const svc = new ServiceProcess(
    [
      `--kubeconfig=${kubeconfig}`,
      `--namespaces=${namespace}`,
      `--release-namespace=${namespace}`,
      `--hash-key-file=${keyFile}`,
      '--leader-elect=false',
      '--argocd-namespaces=',
      ...args,
    ],
    path.join(dir, 'service.log'),
    port,
  );
  let peak = 0;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, svc.rssMiB());
    } catch {
      // exited
    }
  }, 50);
  const started = Date.now();
  try {
    const ready = await svc.waitReady(600_000);
    const rss = svc.rssMiB();
    peak = Math.max(peak, rss);
    return {
      ready_ms: ready.at - started,
      rss_ready_mib: Math.round(rss * 10) / 10,
      rss_peak_mib: Math.round(peak * 10) / 10,
    };
  } finally {
    clearInterval(sampler);
    await svc.stop();
  }
}

async function main() {
  const kube = await connect(say);
  say('compiling the service');
  buildService();
  const ns = (await kube.core.createNamespace({ body: { metadata: { generateName: 'bench-helm-' } } }))
    .metadata?.name as string;
  try {
    say(`creating ${count} Helm release Secrets of ${kib} KiB in ${ns}`);
    const payload = randomBytes(Math.floor((kib * 1024 * 3) / 4)).toString('base64'); // ~kib KiB as stored
    for (let i = 0; i < count; i += 10) {
      await Promise.all(
        Array.from({ length: Math.min(10, count - i) }, (_, j) =>
          kube.core.createNamespacedSecret({
            namespace: ns,
            body: {
              metadata: {
                name: `sh.helm.release.v1.app${i + j}.v1`,
                labels: { owner: 'helm', name: `app${i + j}` },
              },
              type: 'helm.sh/release.v1',
              data: { release: Buffer.from(payload).toString('base64') },
            },
          }),
        ),
      );
    }
    for (let i = 0; i < 20; i++) {
      await kube.core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: `cfg-${i}` }, data: { k: String(i) } },
      });
    }
    const keyFile = path.join(await mkdtemp(path.join(tmpdir(), 'gr-bench-key-')), 'key');
    await writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
    say('start-up with Helm release Secrets left out (default)');
    const excluded = await measure([], keyFile, kube.kubeconfigPath, ns);
    say('start-up with --include-helm-release-secrets=true');
    const included = await measure(['--include-helm-release-secrets=true'], keyFile, kube.kubeconfigPath, ns);
    process.stdout.write(
      `${JSON.stringify({ helm_release_secrets: count, secret_kib: kib, excluded, included }, null, 2)}\n`,
    );
  } finally {
    await kube.core.deleteNamespace({ name: ns });
  }
}

main().catch((err: Error) => {
  process.stderr.write(`${err.stack ?? err.message}\n`);
  process.exit(1);
});
