import { describe, expect, it } from 'vitest';
import type { AppSync } from '../argocd/sync-tracker.ts';
import type { AppKey } from '../argocd/tracking.ts';
import { type AppGate, AppRouter } from './app-router.ts';
import { ClusterDirectory } from './directory.ts';

const A = 'https://a.example';
const B = 'https://b.example';

function app(name: string, destination: AppSync['destination']): AppSync {
  return { app: { namespace: 'argocd', name }, requested: false, sources: [], destination };
}

function recorder() {
  const seen: string[] = [];
  const gate = (server: string): AppGate => ({
    observe: (a: AppSync) => seen.push(`${server} observe ${a.app.name}`),
    appDeleted: (k: AppKey) => seen.push(`${server} deleted ${k.name}`),
  });
  return { seen, gates: new Map([A, B].map((s) => [s, gate(s)])) };
}

describe('AppRouter', () => {
  it("tells only the gate of the Application's destination, by server or by name", () => {
    const dir = new ClusterDirectory();
    dir.put('argocd/a', { name: 'a', server: A });
    dir.put('argocd/b', { name: 'b', server: B });
    const { seen, gates } = recorder();
    const r = new AppRouter(dir, (s) => gates.get(s));
    r.route(app('one', { server: `${A}/` }));
    r.route(app('two', { name: 'b' }));
    r.route(app('three', { name: 'nowhere' }));
    expect(seen).toEqual([`${A} observe one`, `${B} observe two`]);
    expect(r.serverOf({ namespace: 'argocd', name: 'two' })).toBe(B);
    expect(r.serverOf({ namespace: 'argocd', name: 'three' })).toBeUndefined();
    expect(r.appsOf(A).map((a) => a.app.name)).toEqual(['one']);
  });

  it('an Application that moves is deleted from the old gate; a deleted one from its gate', () => {
    const dir = new ClusterDirectory();
    dir.put('argocd/a', { name: 'a', server: A });
    dir.put('argocd/b', { name: 'b', server: B });
    const { seen, gates } = recorder();
    const r = new AppRouter(dir, (s) => gates.get(s));
    r.route(app('one', { name: 'a' }));
    r.route(app('one', { name: 'b' }));
    r.deleted({ namespace: 'argocd', name: 'one' });
    expect(seen).toEqual([`${A} observe one`, `${A} deleted one`, `${B} observe one`, `${B} deleted one`]);
    expect(r.appsOf(B)).toEqual([]);
  });

  it('re-resolves every Application when the cluster Secrets change', () => {
    const dir = new ClusterDirectory();
    dir.put('argocd/x', { name: 'prod', server: A });
    const { seen, gates } = recorder();
    const r = new AppRouter(dir, (s) => gates.get(s));
    r.route(app('one', { name: 'prod' }));
    // The name "prod" now registers server B.
    dir.put('argocd/x', { name: 'prod', server: B });
    r.reroute();
    expect(seen).toEqual([`${A} observe one`, `${A} deleted one`, `${B} observe one`]);
    // A second Secret with the same name: ambiguous, as for Argo CD; no gate has it.
    dir.put('argocd/y', { name: 'prod', server: A });
    r.reroute();
    expect(seen.at(-1)).toBe(`${B} deleted one`);
    expect(r.serverOf({ namespace: 'argocd', name: 'one' })).toBeUndefined();
  });
});
