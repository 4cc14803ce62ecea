// kwok and Helm reuse the k8s.io packages the Kubernetes build compiled (README, "The local control
// plane"): every module they share with it, that provides a package to them, resolves to one version
// in all three, none replaced by another. Run after the global set-up built the binaries, so the
// module cache holds every module read here. Measured: about 6 s.
import { describe, expect, it } from 'vitest';
import { clusterPaths } from '../cluster/paths.ts';
import { type BuildList, providingModules, readBuildList, SHARING, skew } from '../cluster/shared-modules.ts';

const mains: Record<(typeof SHARING)[number], string[]> = {
  kubernetes: [
    'k8s.io/kubernetes/cmd/kube-apiserver',
    'k8s.io/kubernetes/cmd/kube-controller-manager',
    'k8s.io/kubernetes/cmd/kube-scheduler',
    'k8s.io/kubernetes/cmd/kubectl',
  ],
  kwok: ['sigs.k8s.io/kwok/cmd/kwok'],
  helm: ['helm.sh/helm/v3/cmd/helm'],
};

describe('the Go modules that share k8s.io packages with the Kubernetes build', () => {
  it('select the same version of every module that provides them a package', {
    timeout: 120_000,
  }, async () => {
    const { goModules } = clusterPaths();
    const lists: Record<string, BuildList> = {};
    const provides: Record<string, Set<string>> = {};
    for (const m of SHARING) {
      lists[m] = await readBuildList(goModules, m);
      provides[m] = await providingModules(goModules, m, mains[m]);
    }
    for (const m of SHARING) expect(provides[m]?.has('golang.org/x/net')).toBe(true);
    expect(skew(lists, provides)).toEqual([]);
  });
});
