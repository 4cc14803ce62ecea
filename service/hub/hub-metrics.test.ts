import { describe, expect, it } from 'vitest';
import { Metrics } from '../metrics.ts';
import { HubMetrics } from './hub-metrics.ts';

const c = (name: string) => ({ id: `${name}-1`, name, server: `https://${name}.example` });

const lines = (text: string, name: string) =>
  text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));

describe('HubMetrics', () => {
  it("exports each served cluster's engine series with its cluster label, each family once", async () => {
    const process = new Metrics({ defaultMetrics: false, version: '1.2.3', commit: 'abc' });
    const hub = new HubMetrics(process, { version: '1.2.3', commit: 'abc' });
    const a = hub.forCluster(c('spoke-a'));
    const b = hub.forCluster(c('spoke-b'));
    a.setLeader(true);
    b.setLeader(false);
    const text = await hub.text();
    expect(lines(text, 'gitops_reloader_leader')).toEqual(
      expect.arrayContaining([
        'gitops_reloader_leader{cluster="spoke-a",cluster_id="spoke-a-1",server="https://spoke-a.example"} 1',
        'gitops_reloader_leader{cluster="spoke-b",cluster_id="spoke-b-1",server="https://spoke-b.example"} 0',
      ]),
    );
    expect(text.split('\n').filter((l) => l === '# TYPE gitops_reloader_leader gauge')).toHaveLength(1);
    // One build-info series: the process's.
    expect(lines(text, 'gitops_reloader_build_info')).toHaveLength(1);
  });

  it('drops a cluster no longer served, and keeps one served again', async () => {
    const process = new Metrics({ defaultMetrics: false });
    const hub = new HubMetrics(process, {});
    const first = hub.forCluster(c('spoke-a'));
    first.setLeader(true);
    hub.drop('spoke-a-1', first);
    expect(lines(await hub.text(), 'gitops_reloader_leader').filter((l) => l.includes('spoke-a'))).toEqual(
      [],
    );
    const again = hub.forCluster(c('spoke-a'));
    again.setLeader(true);
    // A late drop of the old engine's Metrics leaves the new one in place.
    hub.drop('spoke-a-1', first);
    expect(lines(await hub.text(), 'gitops_reloader_leader')).toContain(
      'gitops_reloader_leader{cluster="spoke-a",cluster_id="spoke-a-1",server="https://spoke-a.example"} 1',
    );
  });

  it('keeps the series of two clusters Argo CD names alike apart (keyed by cluster id)', async () => {
    const hub = new HubMetrics(new Metrics({ defaultMetrics: false }), {});
    hub.forCluster({ id: 'a-1', name: 'prod', server: 'https://a.example' }).setLeader(true);
    hub.forCluster({ id: 'b-2', name: 'prod', server: 'https://b.example' }).setLeader(false);
    expect(lines(await hub.text(), 'gitops_reloader_leader').filter((l) => l.includes('cluster='))).toEqual([
      'gitops_reloader_leader{cluster="prod",cluster_id="a-1",server="https://a.example"} 1',
      'gitops_reloader_leader{cluster="prod",cluster_id="b-2",server="https://b.example"} 0',
    ]);
  });

  it('counts clusters held and credentials Secrets refused, with no label', async () => {
    const process = new Metrics({ defaultMetrics: false });
    const hub = new HubMetrics(process, {});
    let held = 2;
    hub.countHeld(
      () => held,
      () => 3,
    );
    expect(lines(await hub.text(), 'gitops_reloader_hub_clusters_held')).toEqual([
      'gitops_reloader_hub_clusters_held 2',
    ]);
    expect(lines(await hub.text(), 'gitops_reloader_hub_credentials_refused')).toEqual([
      'gitops_reloader_hub_credentials_refused 3',
    ]);
    held = 0;
    expect(lines(await hub.text(), 'gitops_reloader_hub_clusters_held')).toEqual([
      'gitops_reloader_hub_clusters_held 0',
    ]);
  });
});
