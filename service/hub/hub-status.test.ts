import { describe, expect, it } from 'vitest';
import { formatHubStatus } from '../status-command.ts';

describe('gitops-reloader status in hub mode', () => {
  it('prints each served cluster under its name, sorted', () => {
    const text = formatHubStatus({
      hub: true,
      clusters: { 'prod-eu': { leader: false }, dev: { starting: true } },
    });
    expect(text).toBe(
      '== cluster dev\nstarting: waiting for the cluster to answer\n\n' +
        '== cluster prod-eu\nthis replica is not the leader: ask the one that holds the Lease\n',
    );
  });

  it('says when no cluster is served', () => {
    expect(formatHubStatus({ hub: true, clusters: {} })).toBe('hub mode: no cluster served\n');
  });
});
