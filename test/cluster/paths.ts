// Where the local control plane keeps its binaries, state and logs (all under the git-ignored .cluster/).
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface ClusterPaths {
  root: string;
  /** Built binaries, kept across `down` and rebuilt only when a pinned version changes. */
  bin: string;
  /** Certificates, etcd data and per-component kubeconfigs; removed by `down`. */
  state: string;
  logs: string;
  /** Admin kubeconfig for people and tests. */
  kubeconfig: string;
  /** Pids and ports of the running processes. */
  stateFile: string;
  goModules: string;
}

export function clusterPaths(root: string = repoRoot): ClusterPaths {
  const dir = path.join(root, '.cluster');
  return {
    root,
    bin: path.join(dir, 'bin'),
    state: path.join(dir, 'state'),
    logs: path.join(dir, 'logs'),
    kubeconfig: path.join(dir, 'kubeconfig'),
    stateFile: path.join(dir, 'state.json'),
    goModules: path.join(root, 'test', 'cluster', 'go'),
  };
}
