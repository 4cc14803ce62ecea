// The "reload (drift-free)" resource action, run with a real Lua interpreter on each workload kind
// it is offered for: it adds one annotation to the workload's metadata and nothing else, so the pod
// template stays what git says. test/argocd/action.test.ts applies the result to a real cluster.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { canonical, luaInterpreter, mergePatch, runLua } from '../../test/argocd/lua.ts';

const here = path.dirname(new URL(import.meta.url).pathname);
const KEY = 'gitops-reloader.io/reload-requested-at';

interface Customization {
  mergeBuiltinActions?: boolean;
  'discovery.lua': string;
  definitions: Array<{ name: string; 'action.lua': string }>;
}

async function shipped(): Promise<Record<string, Customization>> {
  const cm = parse(await readFile(path.join(here, 'argocd-cm.yaml'), 'utf8')) as {
    data: Record<string, string>;
  };
  const out: Record<string, Customization> = {};
  for (const [k, v] of Object.entries(cm.data)) {
    out[k.replace('resource.customizations.actions.', '')] = parse(v) as Customization;
  }
  return out;
}

const template = {
  metadata: { labels: { app: 'web' }, annotations: { 'prometheus.io/scrape': 'true' } },
  spec: {
    containers: [
      {
        name: 'app',
        image: 'registry.invalid/app:1',
        envFrom: [{ configMapRef: { name: 'app-config' } }],
        ports: [{ containerPort: 8080, protocol: 'TCP' }],
        resources: {},
      },
    ],
    volumes: [],
  },
};

function workload(apiVersion: string, kind: string, annotations?: Record<string, string>) {
  return {
    apiVersion,
    kind,
    metadata: {
      name: 'web',
      namespace: 'shop',
      uid: '6b1f0c6e-7c1c-4c33-9d0b-3f6e1c2a9a10',
      generation: 4,
      labels: { app: 'web' },
      ...(annotations ? { annotations } : {}),
    },
    spec: {
      ...(kind === 'DaemonSet' ? {} : { replicas: 3 }),
      selector: { matchLabels: { app: 'web' } },
      template,
    },
    status: { observedGeneration: 4, replicas: 3, readyReplicas: 3 },
  };
}

const KINDS: Array<[string, string, string]> = [
  ['apps_Deployment', 'apps/v1', 'Deployment'],
  ['apps_StatefulSet', 'apps/v1', 'StatefulSet'],
  ['apps_DaemonSet', 'apps/v1', 'DaemonSet'],
  ['argoproj.io_Rollout', 'argoproj.io/v1alpha1', 'Rollout'],
];

describe('the "reload (drift-free)" resource action', () => {
  it("runs on gopher-lua, Argo CD's Lua VM, in its Lua 5.1 dialect", async () => {
    expect(luaInterpreter()).toMatch(/\/gopher-lua$/);
    expect(await runLua('return _VERSION', {})).toBe('Lua 5.1');
  });

  it('is shipped for Deployment, StatefulSet, DaemonSet and Rollout with the same Lua, keeping built-in actions', async () => {
    const actions = await shipped();
    expect(Object.keys(actions).sort()).toEqual(KINDS.map(([k]) => k).sort());
    const discovery = await readFile(path.join(here, 'reload', 'discovery.lua'), 'utf8');
    const action = await readFile(path.join(here, 'reload', 'action.lua'), 'utf8');
    for (const [key, c] of Object.entries(actions)) {
      expect(c.mergeBuiltinActions, key).toBe(true);
      expect(c['discovery.lua'], key).toBe(discovery);
      expect(c.definitions, key).toEqual([{ name: 'reload', 'action.lua': action }]);
    }
  });

  it.each(KINDS)('%s: discovery offers "reload", enabled', async (key, apiVersion, kind) => {
    const c = (await shipped())[key] as Customization;
    const found = (await runLua(c['discovery.lua'], workload(apiVersion, kind))) as Record<string, unknown>;
    expect(Object.keys(found)).toEqual(['reload']);
    expect(found.reload).toMatchObject({ displayName: 'Reload (drift-free)' });
    expect(found.reload).not.toHaveProperty('disabled');
  });

  it.each(KINDS)('%s: the action patches only the workload metadata', async (key, apiVersion, kind) => {
    const c = (await shipped())[key] as Customization;
    const script = c.definitions[0]?.['action.lua'] as string;
    for (const annotations of [undefined, { team: 'shop' }, { [KEY]: '2020-01-01T00:00:00Z' }] as Array<
      Record<string, string> | undefined
    >) {
      const before = workload(apiVersion, kind, annotations);
      const t0 = Math.floor(Date.now() / 1000) * 1000;
      const after = await runLua(script, before);
      const t1 = Date.now();
      const patch = mergePatch(before, after) as { metadata: { annotations: Record<string, string> } };
      expect(Object.keys(patch)).toEqual(['metadata']);
      expect(Object.keys(patch.metadata)).toEqual(['annotations']);
      const value = patch.metadata.annotations[KEY];
      expect(Object.keys(patch.metadata.annotations)).toEqual([KEY]);
      expect(value).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      expect(Date.parse(value as string)).toBeGreaterThanOrEqual(t0);
      expect(Date.parse(value as string)).toBeLessThanOrEqual(t1);
      // The pod template, what git owns, is untouched.
      expect(canonical((after as typeof before).spec)).toBe(canonical(before.spec));
    }
  });
});
