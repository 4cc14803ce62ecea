import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { clusterPaths } from './paths.ts';
import { type SpokeState, writeSpoke } from './spoke-state.ts';

let root = '';
afterEach(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

const entry = (name: string, pid: number): SpokeState => ({
  name,
  startedAt: '2026-12-05T00:00:00.000Z',
  server: '',
  kubeconfig: `/x/${name}`,
  dir: `/x/${name}`,
  processes: [{ name: `spoke-${name}-etcd`, pid, binary: '/x/etcd' }],
});

it('keeps every entry and the main plane when spokes register many processes at once', async () => {
  root = await mkdtemp(path.join(tmpdir(), 'spoke-state-'));
  const paths = clusterPaths(root);
  await mkdir(paths.state, { recursive: true });
  const main = {
    startedAt: 'then',
    server: 'https://127.0.0.1:1',
    processes: [{ name: 'etcd', pid: 1, binary: '/b' }],
  };
  await writeFile(paths.stateFile, JSON.stringify(main));
  // As startPlane's parallel launches do: writes that are not awaited one by one.
  const names = ['a', 'b', 'c'];
  await Promise.all(
    names.flatMap((n) => Array.from({ length: 10 }, (_, i) => writeSpoke(paths, n, entry(n, i)))),
  );
  const state = JSON.parse(await readFile(paths.stateFile, 'utf8'));
  expect(Object.keys(state.spokes).sort()).toEqual(names);
  for (const n of names) expect(state.spokes[n].processes[0].pid).toBe(9); // the last write of each wins
  expect(state.processes).toEqual(main.processes);
  await writeSpoke(paths, 'b', undefined);
  expect(Object.keys(JSON.parse(await readFile(paths.stateFile, 'utf8')).spokes).sort()).toEqual(['a', 'c']);
});

it('refuses to write when no environment is running', async () => {
  root = await mkdtemp(path.join(tmpdir(), 'spoke-state-'));
  await expect(writeSpoke(clusterPaths(root), 'a', entry('a', 1))).rejects.toThrow(/no cluster state/);
});
