// A HelmRelease from a chart in the git repository, installed and upgraded by the real
// helm-controller with drift detection enabled. A values change in git that changes a ConfigMap
// reloads its reader once, after the upgrade; and helm-controller finds no drift afterwards, in two
// more reconciliations it is asked for.
import { describe, expect } from 'vitest';
import { stringify } from 'yaml';
import { AUTO, reloadedCount } from '../../argocd/fixtures.ts';
import { GitRepo } from '../../support/argocd.ts';
import { idle } from '../../support/decisions.ts';
import { FluxSource, reconciled, startFluxReloader } from '../../support/flux.ts';
import { it, type Kube } from '../../support/kube.ts';
import { events, PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { pending, waitFor } from '../../support/wait-for.ts';
import { deployment } from '../../support/workloads.ts';

const HELM = { group: 'helm.toolkit.fluxcd.io', version: 'v2', plural: 'helmreleases' };

/** The chart at charts/web: ConfigMap app (from values.k) and the Deployment web that reads it. */
function chart(k: string): Record<string, string> {
  const web = deployment('web', {
    replicas: 2,
    annotations: AUTO,
    container: { envFrom: [{ configMapRef: { name: 'app' } }] },
  });
  return {
    'charts/web/Chart.yaml': stringify({ apiVersion: 'v2', name: 'web', version: '0.1.0' }),
    'charts/web/values.yaml': stringify({ k }),
    'charts/web/templates/configmap.yaml':
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: {{ .Values.k | quote }}\n',
    'charts/web/templates/deployment.yaml': stringify(web),
  };
}

interface HelmReleaseObject {
  metadata: { generation?: number };
  status?: {
    observedGeneration?: number;
    lastHandledReconcileAt?: string;
    lastAttemptedRevision?: string;
    conditions?: Array<{ type: string; status: string; reason?: string }>;
    history?: Array<{ chartVersion?: string; status?: string }>;
  };
}

async function read(kube: Kube, namespace: string): Promise<HelmReleaseObject> {
  return (await kube.custom.getNamespacedCustomObject({
    ...HELM,
    namespace,
    name: 'web',
  })) as HelmReleaseObject;
}

/**
 * Ready, with a chart built from `sha` released (reconcileStrategy Revision: the version carries the
 * commit). lastAttemptedRevision names the chart when the attempt starts, while Ready is still the last
 * release's: the newest history snapshot says the upgrade is done.
 */
async function waitReleased(kube: Kube, namespace: string, sha: string): Promise<HelmReleaseObject> {
  return waitFor(
    async () => {
      const hr = await read(kube, namespace);
      const ready = hr.status?.conditions?.find((c) => c.type === 'Ready');
      const rev = hr.status?.lastAttemptedRevision ?? '';
      const latest = hr.status?.history?.[0];
      const released =
        latest?.status === 'deployed' && (latest.chartVersion ?? '').includes(sha.slice(0, 12));
      return ready?.status === 'True' && rev.includes(sha.slice(0, 12)) && released
        ? hr
        : pending({ ready, rev, latest, conditions: hr.status?.conditions });
    },
    { describe: `HelmRelease ${namespace}/web Ready at ${sha}`, timeout: 180_000, interval: 250 },
  );
}

describe('a real Flux HelmRelease', { timeout: 420_000 }, () => {
  it('reloads once after an upgrade that changes a ConfigMap, and helm-controller with drift detection finds no drift in two more reconciliations', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const repo = await GitRepo.create(namespace, chart('1'));
    const source = await FluxSource.create(kube, namespace, repo);
    await kube.custom.createNamespacedCustomObject({
      ...HELM,
      namespace,
      body: {
        apiVersion: 'helm.toolkit.fluxcd.io/v2',
        kind: 'HelmRelease',
        metadata: { name: 'web', namespace },
        spec: {
          interval: '1h',
          timeout: '2m',
          chart: {
            spec: {
              chart: './charts/web',
              sourceRef: { kind: 'GitRepository', name: source.name },
              reconcileStrategy: 'Revision',
              interval: '1h',
            },
          },
          driftDetection: { mode: 'enabled' },
        },
      },
    });
    await waitReleased(kube, namespace, await repo.head());
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const templateBefore = (await kube.apps.readNamespacedDeployment({ name: 'web', namespace })).spec
      ?.template;
    const svc = await startFluxReloader(namespace, [], { onTestFinished });
    const pods = await PodTracker.start(kube, namespace, 'web');

    const sha = await repo.commit(chart('2'), 'values: k=2');
    await source.fetched(sha);
    const upgraded = await waitReleased(kube, namespace, sha);
    const event = await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
    await waitAllReplaced(kube, namespace, 'web', before, 2);
    pods.stop();

    expect(event.message).toContain('ConfigMap/app');
    expect(event.message).toContain(`(after sync of HelmRelease/${namespace}/web at `);
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
    expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
    const live = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    expect(live.spec?.template, 'the template is the chart’s').toEqual(templateBefore);

    // Drift detection: helm-controller compares the release with the cluster at each reconciliation.
    // Two more, each requested and waited for (lastHandledReconcileAt): neither finds drift.
    await idle(svc, `Deployment/${namespace}/web`);
    const history = upgraded.status?.history?.length ?? 0;
    for (let i = 1; i <= 2; i++) {
      const hr = await reconciled<HelmReleaseObject>(kube, HELM, namespace, 'web');
      const drift = await events(kube, namespace, 'DriftDetected', 'web');
      expect(
        drift.map((e) => e.message),
        `helm-controller detected drift (reconciliation ${i})`,
      ).toEqual([]);
      const drifted = hr.status?.conditions?.find((c) => c.type === 'Drifted');
      expect(drifted?.status, `Drifted: ${JSON.stringify(drifted)}`).not.toBe('True');
    }
    const final = await read(kube, namespace);
    expect(final.status?.history?.length ?? 0, 'no corrective upgrade').toBe(history);
    expect(final.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
  });
});
