// The status page's script, run in a VM with a small DOM stand-in: in hub mode it shows each cluster
// and the reloads of those led here, never "not the leader" for the whole replica (issue 35).
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { STATUS_JS } from './status-page.ts';

interface Node {
  textContent: string;
  className?: string;
  children: Node[];
  appendChild(n: Node): void;
  setAttribute(k: string, v: string): void;
}
const node = (): Node => {
  const n: Node = {
    textContent: '',
    children: [],
    appendChild: (c) => {
      n.children.push(c);
    },
    setAttribute: () => {},
  };
  return n;
};

function page() {
  const byId = new Map<string, Node>();
  const get = (id: string) => byId.get(id) ?? (byId.set(id, node()).get(id) as Node);
  const document = {
    getElementById: get,
    querySelector: (sel: string) => get(sel),
    createElement: () => node(),
    body: node(),
  };
  const ctx = vm.createContext({
    document,
    fetch: () => new Promise(() => {}),
    setInterval: () => 0,
    Object,
  });
  vm.runInContext(STATUS_JS, ctx);
  const rows = (table: string) =>
    get(`#${table} tbody`).children.map((tr) => tr.children.map((td) => td.textContent));
  return {
    show: (s: unknown) => (ctx.show as (s: unknown) => void)(s),
    summary: () => get('summary').textContent,
    rows,
  };
}

const empty = { brake: false, halted: [], running: [], waiting: [], excused: [], done: [] };

describe('the status page in hub mode', () => {
  it('shows each cluster, led here or not, and the work of those led here under their names', () => {
    const p = page();
    p.show({
      hub: true,
      clusters: {
        'b-2': { name: 'prod', server: 'https://b.example', leader: false },
        'a-1': {
          name: 'prod',
          server: 'https://a.example',
          leader: true,
          ...empty,
          running: [{ workload: 'Deployment/shop/web', configs: ['ConfigMap/shop/c'], since: 't' }],
        },
        'd-3': { name: 'dev', server: 'https://d.example', starting: true, held: 'refused' },
      },
    });
    expect(p.summary()).toContain('dev (https://d.example): held, its credentials are refused');
    expect(p.summary()).toContain('prod (https://a.example): led here');
    expect(p.summary()).toContain('prod (https://b.example): led by another replica');
    expect(p.summary()).not.toMatch(/^This replica is not the leader/);
    expect(p.rows('running')).toEqual([['prod: Deployment/shop/web', 'ConfigMap/shop/c', 't']]);
  });

  it('still says "not the leader" for a single-cluster replica that does not lead', () => {
    const p = page();
    p.show({ leader: false });
    expect(p.summary()).toMatch(/not the leader/);
  });
});

describe('the status page, excused members (issue 34)', () => {
  it('lists the workloads reloaded but not judged, with the reason, for one cluster and in hub mode', () => {
    const excused = [
      {
        workload: 'Deployment/shop/a-api',
        config: 'ConfigMap/shop/shared',
        why: 'its pods were not Ready before the change',
        since: 't1',
      },
    ];
    const p = page();
    p.show({ leader: true, ...empty, excused });
    expect(p.rows('excused')).toEqual([
      ['Deployment/shop/a-api', 'ConfigMap/shop/shared', 'its pods were not Ready before the change', 't1'],
    ]);
    expect(p.summary()).toContain('1 excused');
    const h = page();
    h.show({
      hub: true,
      clusters: { 'a-1': { name: 'prod', server: 'https://a.example', leader: true, ...empty, excused } },
    });
    expect(h.rows('excused')[0]?.[0]).toBe('prod: Deployment/shop/a-api');
  });
});
