import { describe, expect, it } from 'vitest';
import { formatHubStatus } from '../status-command.ts';

describe('gitops-reloader status in hub mode', () => {
  it('prints each served cluster under its name, server and id, sorted by name (names need not be unique)', () => {
    const text = formatHubStatus({
      hub: true,
      clusters: {
        'prod-2': { name: 'prod', server: 'https://b.example', leader: false },
        'prod-1': {
          name: 'prod',
          server: 'https://a.example',
          starting: true,
          held: 'gr/x: config is not a JSON object',
        },
        'dev-3': { name: 'dev', server: 'https://d.example', starting: true },
      },
    });
    expect(text).toBe(
      '== cluster dev (https://d.example, id dev-3)\nstarting: waiting for the cluster to answer\n\n' +
        '== cluster prod (https://a.example, id prod-1)\nheld: its credentials are refused (gr/x: config is not a JSON object)\n\n' +
        '== cluster prod (https://b.example, id prod-2)\nthis replica is not the leader: ask the one that holds the Lease\n',
    );
  });

  it('says when no cluster is served', () => {
    expect(formatHubStatus({ hub: true, clusters: {} })).toBe('hub mode: no cluster served\n');
  });
});
