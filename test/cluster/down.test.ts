import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { down } from './control-plane.ts';
import { clusterPaths } from './paths.ts';
import { isOurs, type Started, startDetached, stop } from './processes.ts';

let root = '';
const started: Started[] = [];
afterEach(async () => {
  for (const p of started.splice(0)) await stop(p, 1000);
  if (root) await rm(root, { recursive: true, force: true });
});

it('down stops the spokes too, though they are not among the main processes', async () => {
  root = await mkdtemp(path.join(tmpdir(), 'down-'));
  const paths = clusterPaths(root);
  await mkdir(paths.state, { recursive: true });
  const log = path.join(root, 'sleep.log');
  const spawn = (name: string) => {
    const p = startDetached(name, '/bin/sleep', ['600'], log);
    started.push(p);
    return p;
  };
  const main = spawn('etcd');
  const spokeProcs = [spawn('spoke-b-etcd'), spawn('spoke-b-kube-apiserver')];
  const state = {
    startedAt: 'now',
    server: 'https://127.0.0.1:1',
    processes: [main],
    spokes: {
      b: { name: 'b', startedAt: 'now', server: '', kubeconfig: '', dir: '', processes: spokeProcs },
    },
  };
  await writeFile(paths.stateFile, JSON.stringify(state));
  const report = await down(paths);
  expect(report.map((l) => l.split(' ')[0])).toEqual(['spoke-b-kube-apiserver', 'spoke-b-etcd', 'etcd']);
  for (const p of [main, ...spokeProcs]) expect(isOurs(p), `${p.name} stopped`).toBe(false);
  expect(existsSync(paths.stateFile)).toBe(false);
});
