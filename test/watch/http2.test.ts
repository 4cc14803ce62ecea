// Watches over HTTP/2 against the real API server (service/kube/h2-sessions.ts, ADR 0046): every
// watch of one server and one set of credentials is a stream of one connection, each stream ends on
// its own, a connection carries at most 100 streams, and a server (here a proxy) that does not choose
// h2 gets HTTP/1.1 as before.
import type { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, onTestFinished } from 'vitest';
import { h2Sessions } from '../../service/kube/h2-sessions.ts';
import { streamLines } from '../../service/kube/watch-http.ts';
import { ApiProxy } from '../support/api-proxy.ts';
import { it } from '../support/kube.ts';
import { serviceAccountWithRole } from '../support/service-account.ts';
import { pending, waitFor } from '../support/wait-for.ts';

/** Opens a watch; collects the names of the objects its events carry. */
function watchNames(kc: KubeConfig, path: string) {
  const names: string[] = [];
  const stop = new AbortController();
  const ended = streamLines(kc, `${path}?watch=1&timeoutSeconds=120`, stop.signal, (line) => {
    const ev = JSON.parse(line) as { object?: { metadata?: { name?: string } } };
    names.push(ev.object?.metadata?.name ?? '');
  }).catch((err: unknown) => (stop.signal.aborted ? 'stopped' : err));
  onTestFinished(() => stop.abort());
  return { names, stop, ended };
}

const sees = (w: { names: string[] }, name: string) =>
  waitFor(async () => w.names.includes(name) || pending(w.names), {
    describe: `the watch sees ${name}`,
    timeout: 30_000,
  });

describe('watches over HTTP/2', () => {
  it('shares one connection among the watches of one server, and ends each stream alone', async ({
    kube,
    namespace,
  }) => {
    onTestFinished(() => h2Sessions.closeAll());
    expect(h2Sessions.open).toBe(0);
    const cms = watchNames(kube.kc, `/api/v1/namespaces/${namespace}/configmaps`);
    const secrets = watchNames(kube.kc, `/api/v1/namespaces/${namespace}/secrets`);
    const deployments = watchNames(kube.kc, `/apis/apps/v1/namespaces/${namespace}/deployments`);
    await kube.core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'one' } } });
    await kube.core.createNamespacedSecret({ namespace, body: { metadata: { name: 'two' } } });
    await sees(cms, 'one');
    await sees(secrets, 'two');
    // Three watches, one connection.
    expect(h2Sessions.open).toBe(1);

    // One ends; the others go on, on the same connection.
    cms.stop.abort();
    expect(await cms.ended).toBe('stopped');
    await kube.core.createNamespacedSecret({ namespace, body: { metadata: { name: 'three' } } });
    await sees(secrets, 'three');
    expect(deployments.names).toEqual([]);
    expect(h2Sessions.open).toBe(1);
  });

  it("opens another connection when one carries its most streams (the server's limit would hold the rest)", async ({
    kube,
    namespace,
  }) => {
    onTestFinished(() => h2Sessions.closeAll());
    // More than the API server's streams per connection (Go's default, 250): one service scoped to
    // many namespaces watches that many paths.
    const many = Array.from({ length: 260 }, () =>
      watchNames(kube.kc, `/api/v1/namespaces/${namespace}/configmaps`),
    );
    await kube.core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'seen-by-all' } } });
    await waitFor(
      async () => {
        const blind = many.filter((w) => !w.names.includes('seen-by-all')).length;
        return blind === 0 || pending(`${blind} of ${many.length} watches saw nothing`);
      },
      { describe: 'every watch sees the ConfigMap', timeout: 30_000 },
    );
    // 100 streams per connection at most.
    expect(h2Sessions.open).toBe(3);
  });

  it('uses HTTP/1.1 with a server that does not choose h2, as before', async ({ kube, namespace }) => {
    onTestFinished(() => h2Sessions.closeAll());
    // The test proxy is an HTTP/1.1 server: it records every request it forwards.
    const proxy = await ApiProxy.start(kube.kc);
    onTestFinished(() => proxy.close());
    const direct = await serviceAccountWithRole(kube, namespace, 'watcher', [
      { apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['list', 'watch'] },
    ]);
    const kc = await proxy.kubeConfigFor(direct);
    const a = watchNames(kc, `/api/v1/namespaces/${namespace}/configmaps`);
    const b = watchNames(kc, `/api/v1/namespaces/${namespace}/secrets`);
    await kube.core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'one' } } });
    await kube.core.createNamespacedSecret({ namespace, body: { metadata: { name: 'two' } } });
    await sees(a, 'one');
    await sees(b, 'two');
    expect(h2Sessions.open).toBe(0);
    const watches = proxy.requests.filter((r) => r.path.includes('watch=1'));
    expect(watches.map((r) => r.path.split('?')[0]).sort()).toEqual([
      `/api/v1/namespaces/${namespace}/configmaps`,
      `/api/v1/namespaces/${namespace}/secrets`,
    ]);
  });

  it('uses HTTP/1.1 when turned off (--watch-http2=false)', async ({ kube, namespace }) => {
    h2Sessions.enabled = false;
    onTestFinished(() => {
      h2Sessions.enabled = true;
      h2Sessions.closeAll();
    });
    const a = watchNames(kube.kc, `/api/v1/namespaces/${namespace}/configmaps`);
    await kube.core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'one' } } });
    await sees(a, 'one');
    expect(h2Sessions.open).toBe(0);
  });
});
