// What the git-commit suites (test/argocd/real/git-commit.test.ts, test/flux/real/git-commit.test.ts)
// read after the service's checksum commit: the value it must hold, the commit itself, its diff, and
// the rollout from git.
import { hashConfig, namespaceKey, setDigest } from '../../service/core/config-hash.ts';
import { configId } from '../../service/core/types.ts';
import type { GitRepo } from './argocd.ts';
import { inspect } from './git-server.ts';
import type { Kube } from './kube.ts';
import { pending, waitFor } from './wait-for.ts';

export const CONFIG_HASH = 'gitops-reloader.io/config-hash';

/** The value the service publishes for a workload using all of one ConfigMap (ADR 0010's namespace key). */
export function expectedHash(
  key: Buffer,
  namespace: string,
  config: string,
  data: Record<string, string>,
): string {
  const id = configId({ kind: 'ConfigMap', namespace, name: config });
  return setDigest(
    { [id]: hashConfig({ data }, namespaceKey(key, namespace)).all },
    namespaceKey(key, namespace),
  );
}

export async function replicaSetCount(kube: Kube, namespace: string): Promise<number> {
  return (await kube.apps.listNamespacedReplicaSet({ namespace, labelSelector: 'app=web' })).items.length;
}

/** Waits until the repository holds `n` commits; the newest first. */
export function commits(repo: GitRepo, n: number) {
  return waitFor(
    async () => {
      const log = await repo.log();
      return log.length === n ? log : pending(log.map((l) => l.subject));
    },
    { describe: "the service's checksum commit", timeout: 90_000 },
  );
}

/** The commit's added and removed lines, without the file headers. */
export async function changedLines(repo: GitRepo, sha: string): Promise<string[]> {
  return (await inspect.diff(repo.bare, sha))
    .split('\n')
    .filter((l) => /^[+-]/.test(l) && !/^(\+\+\+|---) /.test(l));
}

/** Waits until Deployment web has rolled out its current generation to `replicas` available pods. */
export function rolledOut(kube: Kube, namespace: string, replicas = 2) {
  return waitFor(
    async () => {
      const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
      const s = d.status;
      return s?.observedGeneration === d.metadata?.generation &&
        s?.updatedReplicas === replicas &&
        s?.availableReplicas === replicas &&
        s?.replicas === replicas
        ? d
        : pending(s);
    },
    { describe: 'web rolled out from git', timeout: 120_000 },
  );
}
