// The notification inbox (docs/adr/0013) with the chart's two replicas: records belong to one release,
// so two releases installed in one namespace each act on their own notifications only; and records
// whose sync never ends expire while the leader runs, so they cannot fill the inbox and turn every
// notification into a 429.
import { describe, expect } from 'vitest';
import { INBOX_LIMIT } from '../../service/argocd/inbox.ts';
import { WEBHOOK_PATH } from '../../service/argocd/webhook.ts';
import { it, type Kube } from '../support/kube.ts';
import {
  FAST_LEASE,
  installRelease,
  leaderAndStandby,
  type Release,
  type Replica,
  stoppedAfterEach,
} from '../support/replicas.ts';
import type { LogLine } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';

const TOKEN = 'ha-inbox-token-0123456789abcdef';
const { releases, replicas } = stoppedAfterEach();

async function notify(r: Replica, namespace: string, app: string, phase: string, startedAt: string) {
  const res = await fetch(`${r.url}${WEBHOOK_PATH}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      version: 1,
      app: { namespace: 'argocd', name: app },
      phase,
      startedAt,
      resources: [{ group: '', version: 'v1', kind: 'ConfigMap', namespace, name: app, status: 'Synced' }],
    }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A release of the chart with the webhook on, and its leader and standby (the leader acts first). */
async function release(kube: Kube, namespace: string, extraArgs: string[] = []) {
  const rel: Release = await installRelease(namespace, {
    watch: [namespace],
    webhookToken: TOKEN,
    set: ['argocd.enabled=false'],
    extraArgs: [...FAST_LEASE, ...extraArgs],
  });
  releases.push(rel);
  const [leader, standby] = await leaderAndStandby(kube, rel, replicas, [`${rel.name}-a`, `${rel.name}-b`]);
  return { rel, leader, standby };
}

const taken = (app: string, phase?: string) => (l: LogLine) =>
  l.msg === 'Argo CD notification taken from the inbox' &&
  l.app === `argocd/${app}` &&
  (phase === undefined || l.phase === phase);

/** The inbox records in the namespace (every release's). */
async function records(kube: Kube, namespace: string) {
  return (
    await kube.core.listNamespacedConfigMap({
      namespace,
      labelSelector: 'app.kubernetes.io/component=notification',
    })
  ).items;
}

describe('the notification inbox', () => {
  it('two releases in one namespace each act on their own notifications only', async ({
    kube,
    namespace,
  }) => {
    const a = await release(kube, namespace);
    const b = await release(kube, namespace);

    // Each release's standby receives its own app's sync; its leader takes it from the inbox.
    expect((await notify(a.standby, namespace, 'shop-a', 'Running', '2026-12-04T10:00:00Z')).status).toBe(
      202,
    );
    await a.leader.svc.waitForLog('a takes shop-a running', taken('shop-a', 'Running'));
    expect((await notify(b.standby, namespace, 'shop-b', 'Running', '2026-12-04T10:00:00Z')).status).toBe(
      202,
    );
    await b.leader.svc.waitForLog('b takes shop-b running', taken('shop-b', 'Running'));
    expect((await notify(a.standby, namespace, 'shop-a', 'Succeeded', '2026-12-04T10:00:00Z')).status).toBe(
      202,
    );
    await a.leader.svc.waitForLog('a takes shop-a end', taken('shop-a', 'Succeeded'));
    // Created after every record of shop-a: once b's leader has taken it, its inbox watch has shown
    // it every record of shop-a too (one watch, in order).
    expect((await notify(b.standby, namespace, 'shop-b', 'Succeeded', '2026-12-04T10:00:00Z')).status).toBe(
      202,
    );
    await b.leader.svc.waitForLog('b takes shop-b end', taken('shop-b', 'Succeeded'));

    const wrong = [
      ...[a.leader, a.standby].flatMap((r) =>
        r.svc.logs.filter(taken('shop-b')).map(() => `${r.identity}: shop-b`),
      ),
      ...[b.leader, b.standby].flatMap((r) =>
        r.svc.logs.filter(taken('shop-a')).map(() => `${r.identity}: shop-a`),
      ),
    ];
    expect(wrong, "a release's replicas took the other release's notifications").toEqual([]);
    // Each leader removes its own records once the sync ended, and only those: the inbox empties.
    await waitFor(
      async () => {
        const left = (await records(kube, namespace)).map((c) => c.metadata?.name);
        return left.length === 0 ? true : pending(left);
      },
      { describe: 'both inboxes emptied', timeout: 30_000 },
    );
  });

  it('records of syncs that never end expire while the leader runs, and notifications are accepted again', async ({
    kube,
    namespace,
  }) => {
    // A generous write rate so that the inbox fills well within the records' age bound.
    const { leader, standby } = await release(kube, namespace, [
      '--notification-record-max-age=60s',
      '--api-write-qps=500',
      '--api-write-burst=500',
    ]);
    // INBOX_LIMIT syncs start, and their end notifications are lost.
    const startedAt = (i: number) => new Date(Date.UTC(2026, 11, 4, 10, 0, 0) + i * 1000).toISOString();
    for (let i = 0; i < INBOX_LIMIT; i += 50) {
      const batch = Array.from({ length: Math.min(50, INBOX_LIMIT - i) }, (_, j) =>
        notify(standby, namespace, 'shop', 'Running', startedAt(i + j)),
      );
      const statuses = (await Promise.all(batch)).map((r) => r.status);
      expect(
        statuses.filter((s) => s !== 202),
        'notifications refused while filling',
      ).toEqual([]);
    }
    // The standby counts the records through its watch; the next one is refused once it sees them all.
    await waitFor(
      async () => {
        const r = await notify(standby, namespace, 'shop', 'Running', startedAt(INBOX_LIMIT));
        return r.status === 429 ? true : pending(r.status);
      },
      { describe: 'the full inbox refuses a notification', timeout: 30_000 },
    );
    // Without an end, nothing but the age bound removes them: the leader expires them while it runs,
    // and a new notification is recorded again.
    await waitFor(
      async () => {
        const r = await notify(standby, namespace, 'shop', 'Running', startedAt(INBOX_LIMIT + 1));
        return r.status === 202 ? true : pending(r.status);
      },
      { describe: 'a notification accepted again', timeout: 90_000, interval: 2_000 },
    );
    await leader.svc.waitForLog(
      'the leader expired records',
      (l) => l.msg === 'expired notification records deleted',
    );
    expect(standby.svc.logs.filter((l) => l.msg === 'expired notification records deleted')).toEqual([]);
  }, 300_000);
});
