import { describe, expect, it } from 'vitest';
import { Metrics, resourceOf } from './metrics.ts';

/** The value of one series in the exposition text, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

function fakeClock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('metrics', () => {
  it('exposes Reloader-compatible and own reload counters starting at 0', async () => {
    const text = await new Metrics({ defaultMetrics: false }).text();
    expect(sample(text, 'reloader_reload_executed_total{success="true"}')).toBe(0);
    expect(sample(text, 'reloader_reload_executed_total{success="false"}')).toBe(0);
    expect(
      sample(text, 'gitops_reloader_reloads_total{strategy="restart",kind="Deployment",result="failure"}'),
    ).toBe(0);
    expect(sample(text, 'gitops_reloader_leader')).toBe(0);
    expect(sample(text, 'gitops_reloader_reloads_in_progress')).toBe(0);
    expect(sample(text, 'gitops_reloader_reloads_stalled')).toBe(0);
  });

  it('counts new objects of old names and the start-up catch-up verdicts, from 0', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const zero = await m.text();
    for (const series of [
      'gitops_reloader_recreated_objects_total{object="workload"}',
      'gitops_reloader_recreated_objects_total{object="config"}',
      'gitops_reloader_catch_up_total{result="reload"}',
      'gitops_reloader_catch_up_total{result="current"}',
    ])
      expect(sample(zero, series)).toBe(0);
    m.recreated('workload');
    m.recreated('config', 3);
    m.caughtUp('current');
    const text = await m.text();
    expect(sample(text, 'gitops_reloader_recreated_objects_total{object="workload"}')).toBe(1);
    expect(sample(text, 'gitops_reloader_recreated_objects_total{object="config"}')).toBe(3);
    expect(sample(text, 'gitops_reloader_catch_up_total{result="current"}')).toBe(1);
    expect(sample(text, 'gitops_reloader_catch_up_total{result="reload"}')).toBe(0);
  });

  it('counts a successful reload, its duration and pods replaced', async () => {
    const clock = fakeClock();
    const m = new Metrics({ defaultMetrics: false, now: clock.now });
    const r = m.reloadStarted('restart', 'Deployment');
    expect(sample(await m.text(), 'gitops_reloader_reloads_in_progress')).toBe(1);
    clock.advance(7_000);
    r.finish('success', 3);
    const text = await m.text();
    expect(sample(text, 'reloader_reload_executed_total{success="true"}')).toBe(1);
    expect(
      sample(text, 'gitops_reloader_reloads_total{strategy="restart",kind="Deployment",result="success"}'),
    ).toBe(1);
    expect(sample(text, 'gitops_reloader_pods_replaced_total{kind="Deployment"}')).toBe(3);
    expect(sample(text, 'gitops_reloader_reloads_in_progress')).toBe(0);
    const labels = 'strategy="restart",kind="Deployment",result="success"';
    expect(sample(text, `gitops_reloader_reload_duration_seconds_sum{${labels}}`)).toBe(7);
    expect(sample(text, `gitops_reloader_reload_duration_seconds_bucket{le="5",${labels}}`)).toBe(0);
    expect(sample(text, `gitops_reloader_reload_duration_seconds_bucket{le="10",${labels}}`)).toBe(1);
  });

  it('counts a failure as success="false", and a skip or an interruption not at all, in the Reloader metric', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.reloadStarted('annotate', 'StatefulSet').finish('failure');
    m.reloadStarted('restart', 'CronJob').finish('skipped');
    m.reloadStarted('restart', 'Deployment').finish('interrupted');
    const text = await m.text();
    expect(sample(text, 'reloader_reload_executed_total{success="false"}')).toBe(1);
    expect(sample(text, 'reloader_reload_executed_total{success="true"}')).toBe(0);
    expect(
      sample(text, 'gitops_reloader_reloads_total{strategy="restart",kind="CronJob",result="skipped"}'),
    ).toBe(1);
    expect(
      sample(
        text,
        'gitops_reloader_reloads_total{strategy="restart",kind="Deployment",result="interrupted"}',
      ),
    ).toBe(1);
    expect(sample(text, 'gitops_reloader_reloads_in_progress')).toBe(0);
  });

  it('holds a stalled reload in the stalled gauge until it finishes, counting it once', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const a = m.reloadStarted('restart', 'Deployment');
    const b = m.reloadStarted('restart', 'StatefulSet');
    a.stalled();
    a.stalled();
    expect(sample(await m.text(), 'gitops_reloader_reloads_stalled')).toBe(1);
    a.finish('success');
    a.finish('success');
    b.finish('success');
    const text = await m.text();
    expect(sample(text, 'gitops_reloader_reloads_stalled')).toBe(0);
    expect(sample(text, 'gitops_reloader_reloads_in_progress')).toBe(0);
    expect(sample(text, 'reloader_reload_executed_total{success="true"}')).toBe(2);
  });

  it('keeps namespace and object names out of watch labels', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.watchFailure('/api/v1/namespaces/team-secret-project/configmaps', 'gone-410');
    m.watchFailure('/apis/apps/v1/deployments', 'watch-failed');
    m.watchedItemsFrom(() => [
      ['/api/v1/namespaces/a/secrets', 2],
      ['/api/v1/namespaces/b/secrets', 3],
      ['deployments', 4],
    ]);
    const text = await m.text();
    expect(text).not.toContain('team-secret-project');
    expect(sample(text, 'gitops_reloader_watch_failures_total{resource="configmaps",mode="gone-410"}')).toBe(
      1,
    );
    expect(sample(text, 'gitops_reloader_watched_items{resource="secrets"}')).toBe(5);
    expect(sample(text, 'gitops_reloader_watched_items{resource="deployments"}')).toBe(4);
  });

  it('reads watched item counts afresh at every scrape, and drops a removed source', async () => {
    const m = new Metrics({ defaultMetrics: false });
    let n = 1;
    const remove = m.watchedItemsFrom(() => [['configmaps', n]]);
    expect(sample(await m.text(), 'gitops_reloader_watched_items{resource="configmaps"}')).toBe(1);
    n = 9;
    expect(sample(await m.text(), 'gitops_reloader_watched_items{resource="configmaps"}')).toBe(9);
    remove();
    expect(sample(await m.text(), 'gitops_reloader_watched_items{resource="configmaps"}')).toBeUndefined();
  });

  it('records webhook codes, git results, push retries, leader and latency', async () => {
    const m = new Metrics({ defaultMetrics: false });
    m.webhookRequest(202);
    m.webhookRequest(401);
    m.webhookRequest(401);
    m.webhookRequest(9999);
    m.gitCommit('committed');
    m.gitPushRetry();
    m.setLeader(true);
    m.eventToAction(3.2);
    const text = await m.text();
    expect(sample(text, 'gitops_reloader_webhook_requests_total{code="401"}')).toBe(2);
    expect(sample(text, 'gitops_reloader_webhook_requests_total{code="other"}')).toBe(1);
    expect(sample(text, 'gitops_reloader_git_commits_total{result="committed"}')).toBe(1);
    expect(sample(text, 'gitops_reloader_git_push_retries_total')).toBe(1);
    expect(sample(text, 'gitops_reloader_leader')).toBe(1);
    expect(sample(text, 'gitops_reloader_event_to_action_seconds_bucket{le="5"}')).toBe(1);
    expect(sample(text, 'gitops_reloader_event_to_action_seconds_bucket{le="3"}')).toBe(0);
  });

  it('includes process and Node.js runtime metrics by default, in its own registry', async () => {
    const a = new Metrics({ version: '1.2.3', commit: 'abc1234' });
    const b = new Metrics();
    const text = await a.text();
    expect(text).toContain('process_resident_memory_bytes');
    expect(text).toContain('nodejs_eventloop_lag_seconds');
    expect(text).toContain('gitops_reloader_build_info{version="1.2.3",commit="abc1234"');
    a.setLeader(true);
    expect(sample(await b.text(), 'gitops_reloader_leader')).toBe(0);
  });

  it('uses only a handful of label values however many reloads run', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const count = async () =>
      (await m.text()).split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
    const fixed = await count();
    for (let i = 0; i < 500; i++) m.reloadStarted('restart', 'Deployment').finish('success', 1);
    // Reloads add no series beyond the fixed set a fresh registry already exports (at 0), and that
    // set stays small. (160 with issue 20's and 26's families: held reloads, swept surge pods, start
    // failures by reason, catch-up results, recreated objects; each a closed set of label values.)
    expect(await count()).toBeLessThanOrEqual(fixed + 20);
    expect(fixed).toBeLessThanOrEqual(170);
  });
});

describe('resourceOf', () => {
  it('keeps only the resource plural of a watch path', () => {
    expect(resourceOf('/api/v1/namespaces/x/configmaps')).toBe('configmaps');
    expect(resourceOf('/apis/argoproj.io/v1alpha1/rollouts')).toBe('rollouts');
    expect(resourceOf('secrets')).toBe('secrets');
    expect(resourceOf('/api/v1/Weird Name')).toBe('other');
    expect(resourceOf('')).toBe('other');
  });
});
