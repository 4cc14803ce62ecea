// The per-reload live view against the real API server: it opens with the complete current state from
// one WatchList request (no LIST), follows changes within its selector, waits for a condition, and
// stops without leaving anything running.
import { describe, expect, onTestFinished } from 'vitest';
import { openLiveView } from '../../service/kube/live-view.ts';
import type { RawObject } from '../../service/kube/watch-logic.ts';
import { it, type Kube } from '../support/kube.ts';

const keepV = (raw: RawObject) => (raw.data as Record<string, string> | undefined)?.v;

async function createCm(kube: Kube, namespace: string, name: string, v: string, team: string) {
  await kube.core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name, labels: { team } }, data: { v } },
  });
}

function viewOf(kube: Kube, namespace: string, initialState: 'auto' | 'list' = 'auto') {
  const stop = new AbortController();
  const view = openLiveView(kube.kc, {
    path: `/api/v1/namespaces/${namespace}/configmaps`,
    labelSelector: 'team=a',
    transform: keepV,
    signal: stop.signal,
    initialState,
  });
  onTestFinished(() => view.stop());
  return { view, stop };
}

describe('openLiveView', () => {
  it('opens with every matching object that existed before it, and only those', async ({
    kube,
    namespace,
  }) => {
    for (let i = 0; i < 30; i++) await createCm(kube, namespace, `a-${i}`, String(i), 'a');
    await createCm(kube, namespace, 'b-0', 'x', 'b');
    const { view } = viewOf(kube, namespace);
    await view.ready;
    expect(view.items.size).toBe(30);
    expect(view.items.get('a-7')).toBe('7');
    expect(view.items.has('b-0')).toBe(false);
    expect(view.failing).toBeUndefined();
  });

  it.for(['auto', 'list'] as const)(
    'follows creates, updates and deletes, and until() resolves on the change it waits for (%s)',
    async (initialState, { kube, namespace }) => {
      await createCm(kube, namespace, 'a-1', '1', 'a');
      const { view } = viewOf(kube, namespace, initialState);
      await view.ready;
      await createCm(kube, namespace, 'a-2', '2', 'a');
      expect(await view.until((m) => m.get('a-2') === '2', 20_000)).toBe(true);
      await kube.core.replaceNamespacedConfigMap({
        name: 'a-1',
        namespace,
        body: { metadata: { name: 'a-1', labels: { team: 'a' } }, data: { v: 'one' } },
      });
      expect(await view.until((m) => m.get('a-1') === 'one', 20_000)).toBe(true);
      await kube.core.deleteNamespacedConfigMap({ name: 'a-2', namespace });
      expect(await view.until((m) => !m.has('a-2'), 20_000)).toBe(true);
      // A condition that never holds gives false at its deadline, not a hang.
      expect(await view.until((m) => m.has('never'), 300)).toBe(false);
    },
  );

  it('changed() wakes on a change well before its deadline', async ({ kube, namespace }) => {
    const { view } = viewOf(kube, namespace);
    await view.ready;
    const woke = view.changed(60_000);
    await createCm(kube, namespace, 'a-9', '9', 'a');
    await woke;
    // Woken by the event, not by the deadline: the change is already in the view.
    expect(view.items.get('a-9')).toBe('9');
  });

  it('stops when its signal aborts: stop() resolves and changed() no longer waits', async ({
    kube,
    namespace,
  }) => {
    const { view, stop } = viewOf(kube, namespace);
    stop.abort(new Error('reload over'));
    await expect(view.stop()).resolves.toBeUndefined();
    // changed() after the stop returns at once instead of waiting out its deadline.
    await expect(view.changed(60_000)).resolves.toBeUndefined();
  });
});
