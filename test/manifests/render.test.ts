// The shipped manifests: the Helm chart renders, lints and installs on the real control plane (and
// keeps its hash key on upgrade); install.yaml and the Kustomize base are exactly the chart's render;
// the Kustomize base applies under an overlay; and the RBAC is least-privilege in every rendering.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  ApiextensionsV1Api,
  AuthorizationV1Api,
  type KubeConfig,
  loadAllYaml,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1CustomResourceDefinition,
  type V1ResourceAttributes,
} from '@kubernetes/client-node';
import { describe, expect, inject, it as plainIt } from 'vitest';
import { loadConfig, serveFlags } from '../../service/config/config.ts';
import { reloaderFlags } from '../../service/config/reloader-flags.ts';
import { migrate } from '../../service/migrate/migrate-command.ts';
import { repoRoot } from '../cluster/paths.ts';
import { fixturesDir as reloaderChartFixtures } from '../compat/migrate-chart.ts';
import { it, type Kube, statusOf } from '../support/kube.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import {
  allFeaturesValues,
  chartDir,
  deploymentOf,
  GENERATED_HEADER,
  helmTemplate,
  INSTALL_RELEASE,
  installValues,
  installYaml,
  type K8sObject,
  kustomizeBase,
  kustomizeBaseYaml,
  parseObjects,
  rbacProblems,
  run,
  serveFlagsUsed,
  verbsByResource,
} from './tools.ts';

/**
 * Flags the chart passes that `gitops-reloader serve` does not define yet, with the work that adds
 * them. The test fails when one of them lands in serveFlags, so this list only shrinks.
 */
const PENDING_FLAGS: Record<string, string> = {};

const suffix = () => randomBytes(3).toString('hex');
const RELOADER_FLAG_NAMES = new Set(reloaderFlags.map((f) => f.name));

async function renderInstall(): Promise<string> {
  return (
    GENERATED_HEADER + (await helmTemplate(INSTALL_RELEASE, INSTALL_RELEASE, { values: [installValues] }))
  );
}

/** Renders the Kustomize base under an overlay in a temporary directory. */
async function kustomize(overlay: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-kustomize-'));
  try {
    const kustomization = {
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      // Kustomize accepts only a relative path to a base.
      resources: [path.relative(dir, kustomizeBase)],
      ...overlay,
    };
    await writeFile(path.join(dir, 'kustomization.yaml'), JSON.stringify(kustomization));
    return (await run('kubectl', ['kustomize', dir])).stdout;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function kubectl(args: string[], input?: string) {
  return run('kubectl', ['--kubeconfig', inject('kubeconfig'), ...args], { input });
}

function helm(args: string[]) {
  const home = path.join(tmpdir(), 'gr-helm-home');
  return run('helm', [...args, '--kubeconfig', inject('kubeconfig')], {
    env: {
      HELM_CACHE_HOME: path.join(home, 'cache'),
      HELM_CONFIG_HOME: path.join(home, 'config'),
      HELM_DATA_HOME: path.join(home, 'data'),
    },
  });
}

/** Asks the API server's authorizer whether a ServiceAccount may do something. */
async function allowed(
  kc: KubeConfig,
  sa: { namespace: string; name: string },
  attrs: V1ResourceAttributes,
): Promise<boolean> {
  const review = await kc.makeApiClient(AuthorizationV1Api).createSubjectAccessReview({
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: `system:serviceaccount:${sa.namespace}:${sa.name}`,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${sa.namespace}`, 'system:authenticated'],
        resourceAttributes: attrs,
      },
    },
  });
  return review.status?.allowed === true;
}

/** "verb resource[.group][/sub] [name] [in ns]", as kubectl auth can-i → SubjectAccessReview attributes. */
function attrs(spec: string): V1ResourceAttributes {
  const m = /^(\S+) ([a-z]+)(?:\.([a-z0-9.-]+))?(?:\/([a-z]+))?(?: (\S+))?(?: in (\S+))?$/.exec(spec);
  if (!m) throw new Error(`bad access spec ${spec}`);
  const [, verb, resource, group, subresource, name, namespace] = m;
  return { verb, group: group ?? '', resource, subresource, name, namespace };
}

async function expectAccess(
  kc: KubeConfig,
  sa: { namespace: string; name: string },
  specs: { allowed: string[]; denied: string[] },
) {
  const wrong: string[] = [];
  for (const s of specs.allowed) if (!(await allowed(kc, sa, attrs(s)))) wrong.push(`denied: ${s}`);
  for (const s of specs.denied) if (await allowed(kc, sa, attrs(s))) wrong.push(`allowed: ${s}`);
  expect(wrong).toEqual([]);
}

/** Installs our stand-in monitoring CRDs unless the cluster already has them (real or ours). */
async function ensureMonitoringCrds(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const text = await readFile(
    path.join(repoRoot, 'test', 'manifests', 'crds', 'monitoring.coreos.com.yaml'),
    'utf8',
  );
  for (const crd of loadAllYaml(text) as V1CustomResourceDefinition[]) {
    const name = crd.metadata?.name as string;
    try {
      await api.createCustomResourceDefinition({ body: crd });
    } catch (err) {
      if (statusOf(err) !== 409) throw err;
    }
    await waitFor(
      async () => {
        const c = await api.readCustomResourceDefinition({ name });
        const ok = c.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True');
        return ok ? true : pending(c.status?.conditions);
      },
      { describe: `CRD ${name} to be established` },
    );
  }
}

async function readyPods(kube: Kube, namespace: string, selector: string): Promise<number> {
  const pods = await kube.core.listNamespacedPod({ namespace, labelSelector: selector });
  return pods.items.filter((p) =>
    p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  ).length;
}

async function clusterRoleExists(kube: Kube, name: string): Promise<boolean> {
  try {
    await kube.kc.makeApiClient(RbacAuthorizationV1Api).readClusterRole({ name });
    return true;
  } catch (err) {
    if (statusOf(err) === 404) return false;
    throw err;
  }
}

const podSecurityRestricted = (kube: Kube, name: string) =>
  kube.core.patchNamespace(
    { name, body: { metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );

describe('the Helm chart', () => {
  plainIt('passes helm lint with default and all-features values', async () => {
    await run('helm', ['lint', '--strict', chartDir]);
    await run('helm', ['lint', '--strict', chartDir, '-f', allFeaturesValues]);
  });

  plainIt('is what install.yaml and the Kustomize base hold, byte for byte', async () => {
    const rendered = await renderInstall();
    if (process.env.UPDATE_MANIFESTS) {
      await writeFile(installYaml, rendered);
      await writeFile(kustomizeBaseYaml, rendered);
    }
    const [install, base] = await Promise.all([
      readFile(installYaml, 'utf8'),
      readFile(kustomizeBaseYaml, 'utf8'),
    ]);
    const hint =
      'stale: regenerate with UPDATE_MANIFESTS=1 npx vitest run --project integration test/manifests/render.test.ts';
    expect(install, `manifests/install.yaml is ${hint}`).toBe(rendered);
    expect(base, `manifests/kustomize/base/gitops-reloader.yaml is ${hint}`).toBe(rendered);
  });

  plainIt('grants no wildcard and no write on Secrets in any rendering', async () => {
    const renderings: Record<string, string> = {
      default: await helmTemplate('gr', 'ops'),
      'all features': await helmTemplate('gr', 'ops', { values: [allFeaturesValues] }),
      'install.yaml': await readFile(installYaml, 'utf8'),
      'kustomize base': (await run('kubectl', ['kustomize', kustomizeBase])).stdout,
    };
    for (const [name, text] of Object.entries(renderings)) {
      const objects = parseObjects(text);
      expect(objects.filter((o) => o.kind === 'ClusterRole').length, name).toBe(1);
      expect(rbacProblems(objects), name).toEqual([]);
    }
  });

  plainIt('reports a wildcard or a Secret write when a role has one', () => {
    const role = (rules: unknown[]): K8sObject[] => [
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'x' }, rules },
    ];
    expect(rbacProblems(role([{ apiGroups: [''], resources: ['secrets'], verbs: ['patch'] }]))).toHaveLength(
      1,
    );
    expect(rbacProblems(role([{ apiGroups: ['apps'], resources: ['*'], verbs: ['get'] }]))).toHaveLength(1);
    expect(rbacProblems(role([{ apiGroups: [''], resources: ['pods'], verbs: ['*'] }]))).toHaveLength(1);
    expect(rbacProblems(role([{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list'] }]))).toEqual(
      [],
    );
    // Creating the hash key in the release namespace is the one Secret write allowed; only in a Role.
    expect(rbacProblems(role([{ apiGroups: [''], resources: ['secrets'], verbs: ['create'] }]))).toHaveLength(
      1,
    );
    const namespaced = (rules: unknown[]): K8sObject[] => [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name: 'x', namespace: 'ops' },
        rules,
      },
    ];
    expect(
      rbacProblems(namespaced([{ apiGroups: [''], resources: ['secrets'], verbs: ['create'] }])),
    ).toEqual([]);
    expect(
      rbacProblems(namespaced([{ apiGroups: [''], resources: ['secrets'], verbs: ['patch'] }])),
    ).toHaveLength(1);
  });

  plainIt(
    'grants by feature: no write on workloads by default, patch only for annotate and Rollouts',
    async () => {
      const byDefault = parseObjects(await helmTemplate('gr', 'ops'));
      expect(verbsByResource(byDefault, 'cluster')).toEqual({
        configmaps: ['get', 'list', 'watch'],
        events: ['create'],
        // A namespace's creation time decides the start-up rule's same-second tie (docs/catch-up.md).
        namespaces: ['get'],
        pods: ['create', 'delete', 'get', 'list', 'patch', 'watch'],
        'pods/eviction': ['create'],
        secrets: ['get', 'list', 'watch'],
        'apps/daemonsets': ['get', 'list', 'watch'],
        'apps/deployments': ['get', 'list', 'watch'],
        'apps/replicasets': ['get', 'list'],
        'apps/statefulsets': ['get', 'list', 'watch'],
        'argoproj.io/applications': ['get', 'list', 'watch'],
        'argoproj.io/rollouts': ['get', 'list', 'patch', 'watch'],
        'batch/cronjobs': ['get', 'list', 'watch'],
        'batch/jobs': ['create', 'delete', 'get', 'list', 'watch'],
        // Flux: read only (docs/flux.md).
        'helm.toolkit.fluxcd.io/helmreleases': ['get', 'list', 'watch'],
        'kustomize.toolkit.fluxcd.io/kustomizations': ['get', 'list', 'watch'],
        'source.toolkit.fluxcd.io/buckets': ['get', 'list', 'watch'],
        'source.toolkit.fluxcd.io/gitrepositories': ['get', 'list', 'watch'],
        'source.toolkit.fluxcd.io/ocirepositories': ['get', 'list', 'watch'],
      });
      // flux.enabled=false grants nothing on Flux kinds.
      const noFlux = verbsByResource(
        parseObjects(await helmTemplate('gr', 'ops', { set: ['flux.enabled=false'] })),
        'cluster',
      );
      expect(Object.keys(noFlux).filter((r) => r.includes('fluxcd.io'))).toEqual([]);
      expect(verbsByResource(byDefault, 'namespace')).toEqual({
        // delete: a Job reload's record goes once its Job is created again (docs/adr/0025).
        configmaps: ['create', 'delete', 'get', 'list', 'patch'],
        secrets: ['create'],
        'coordination.k8s.io/leases': ['create', 'get', 'update'],
        // A LeaseReleased Event on the Lease when a new leader cannot act (docs/adr/0027).
        events: ['create'],
      });
      // The webhook's notification inbox: the leader deletes the records it handled.
      expect(
        verbsByResource(
          parseObjects(
            await helmTemplate('gr', 'ops', { set: ['webhook.enabled=true', 'webhook.tokenSecret.name=t'] }),
          ),
          'namespace',
        ).configmaps,
      ).toEqual(['create', 'delete', 'get', 'list', 'patch']);
      // A Secret of your own: nothing to create.
      expect(
        verbsByResource(
          parseObjects(await helmTemplate('gr', 'ops', { set: ['hashKey.existingSecret=mine'] })),
          'namespace',
        ).secrets,
      ).toBeUndefined();
      const lease = byDefault
        .filter((o) => o.kind === 'Role')
        .flatMap((o) => o.rules as Array<{ resources: string[]; verbs: string[]; resourceNames?: string[] }>)
        .find((r) => r.resources.includes('leases') && r.verbs.includes('update'));
      expect(lease?.resourceNames).toEqual(['gr-gitops-reloader-leader']);

      const annotate = verbsByResource(
        parseObjects(await helmTemplate('gr', 'ops', { set: ['rbac.annotate=true'] })),
        'cluster',
      );
      for (const r of ['apps/deployments', 'apps/statefulsets', 'apps/daemonsets', 'batch/cronjobs']) {
        expect(annotate[r], r).toContain('patch');
      }
      const minimal = verbsByResource(
        parseObjects(
          await helmTemplate('gr', 'ops', {
            set: [
              'argoRollouts.enabled=false',
              'argocd.enabled=false',
              'rbac.restart=false',
              'reload.defaultStrategy=annotate',
              'rbac.annotate=true',
            ],
          }),
        ),
        'cluster',
      );
      expect(Object.keys(minimal).filter((k) => k.startsWith('argoproj.io') || k.startsWith('pods'))).toEqual(
        [],
      );
      // Without the restart strategy, Jobs are only watched: nothing creates or deletes them.
      expect(minimal['batch/jobs']).toEqual(['get', 'list', 'watch']);
      const selector = verbsByResource(
        parseObjects(await helmTemplate('gr', 'ops', { set: ['reload.namespaceSelector=a=b'] })),
        'cluster',
      );
      expect(selector.namespaces).toEqual(['get', 'list', 'watch']);
      // CSI: off by default (as in Reloader); when on, read-only on the driver's two resources.
      expect(
        Object.keys(verbsByResource(byDefault, 'cluster')).filter((k) => k.includes('secrets-store')),
      ).toEqual([]);
      const csi = parseObjects(await helmTemplate('gr', 'ops', { set: ['csiIntegration.enabled=true'] }));
      const csiVerbs = verbsByResource(csi, 'cluster');
      expect(csiVerbs['secrets-store.csi.x-k8s.io/secretproviderclasses']).toEqual(['get', 'list', 'watch']);
      expect(csiVerbs['secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses']).toEqual([
        'get',
        'list',
        'watch',
      ]);
      expect(serveFlagsUsed(csi)).toContain('enable-csi-integration');
    },
  );

  plainIt(
    'grants git mode appprojects get, and per namespace only when reload.namespaces lists them',
    async () => {
      const git = ['git.enabled=true', 'git.useArgoCDRepoCredentials=true'];
      const cluster = verbsByResource(parseObjects(await helmTemplate('gr', 'ops', { set: git })), 'cluster');
      expect(cluster['argoproj.io/appprojects']).toEqual(['get']);

      const objects = parseObjects(
        await helmTemplate('gr', 'ops', {
          set: [...git, 'reload.namespaces={team-a,team-b}', 'argocd.namespaces={argocd}'],
        }),
      );
      // Nothing cluster-wide: no ClusterRole at all without a namespace selector.
      expect(objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding')).toEqual([]);
      expect(rbacProblems(objects)).toEqual([]);
      const roles = objects.filter((o) => o.kind === 'Role' || o.kind === 'RoleBinding');
      const where = (kind: string, name: string) =>
        roles
          .filter((o) => o.kind === kind && o.metadata.name === name)
          .map((o) => o.metadata.namespace)
          .sort();
      expect(where('Role', 'gr-gitops-reloader-reload')).toEqual(['team-a', 'team-b']);
      expect(where('RoleBinding', 'gr-gitops-reloader-reload')).toEqual(['team-a', 'team-b']);
      expect(where('Role', 'gr-gitops-reloader-argocd')).toEqual(['argocd']);
      const argocd = verbsByResource(
        roles.filter((o) => o.metadata.namespace === 'argocd'),
        'namespace',
      );
      expect(argocd['argoproj.io/applications']).toEqual(['get', 'list', 'watch']);
      expect(argocd['argoproj.io/appprojects']).toEqual(['get']);
      expect(argocd.secrets).toEqual(['get', 'list']);
      const teamA = verbsByResource(
        roles.filter((o) => o.metadata.namespace === 'team-a'),
        'namespace',
      );
      expect(teamA.events).toEqual(['create']);
      expect(teamA['pods/eviction']).toEqual(['create']);
      expect(teamA['argoproj.io/applications']).toBeUndefined();
    },
  );

  plainIt('ships the surge-pod ValidatingAdmissionPolicy off by default', async () => {
    const kinds = (objects: K8sObject[]) =>
      objects.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy')).map((o) => o.kind);
    expect(kinds(parseObjects(await helmTemplate('gr', 'ops')))).toEqual([]);
    expect(
      kinds(parseObjects(await helmTemplate('gr', 'ops', { set: ['rbac.surgePodPolicy=true'] }))),
    ).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
  });

  plainIt(
    'passes the service only flags that `gitops-reloader serve` defines (or that are pending)',
    async () => {
      const known = new Set(serveFlags.map((f) => f.name));
      for (const [flag, why] of Object.entries(PENDING_FLAGS)) {
        expect(known.has(flag), `--${flag} is now a serve flag (${why}): remove it from PENDING_FLAGS`).toBe(
          false,
        );
      }
      for (const values of [[], [allFeaturesValues], [installValues]]) {
        const used = serveFlagsUsed(parseObjects(await helmTemplate('gr', 'ops', { values })));
        const unknown = used.filter((f) => !known.has(f) && !(f in PENDING_FLAGS));
        expect(unknown, `values ${values.join(',') || 'default'}`).toEqual([]);
      }
    },
  );

  plainIt(
    "renders `migrate`'s values for each Reloader chart value set into args `serve` accepts",
    async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'gr-migrate-'));
      try {
        const { readdirSync } = await import('node:fs');
        const sets = readdirSync(reloaderChartFixtures).filter((f) => f.endsWith('.rendered.yaml'));
        expect(sets.length).toBeGreaterThanOrEqual(5);
        const known = new Set(serveFlags.map((f) => f.name));
        for (const set of sets) {
          let out = '';
          await migrate(
            [`--manifests=${path.join(reloaderChartFixtures, set)}`],
            {},
            (t) => {
              out += t;
            },
            () => undefined,
          );
          const values = path.join(dir, set);
          await writeFile(values, out);
          const rendered = parseObjects(await helmTemplate('gr', 'ops', { values: [values] }));
          const dep = deploymentOf(rendered);
          const args = dep.spec.template.spec.containers[0]?.args ?? [];
          expect(args[0], set).toBe('serve');
          // The environment the pod gets: plain values as rendered; a Secret's value is not known at
          // render time, so a stand-in of the right shape (the alert webhook URL, issue 37).
          const env: Record<string, string> = {};
          const podEnv = (dep.spec.template.spec.containers[0]?.env ?? []) as Array<{
            name: string;
            value?: string;
            valueFrom?: { secretKeyRef?: unknown };
          }>;
          for (const e of podEnv)
            env[e.name] =
              e.value ?? (e.valueFrom?.secretKeyRef ? 'https://hooks.example.invalid/secret' : '');
          // Reloader's flags migrate passes through extraArgs are serve flags too (allServeFlags).
          expect(() => loadConfig([...args.slice(1), '--release-namespace=ops'], env), set).not.toThrow();
          const ours = serveFlagsUsed(rendered);
          expect(
            ours.filter((f) => !known.has(f) && !RELOADER_FLAG_NAMES.has(f)),
            set,
          ).toEqual([]);
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );

  plainIt('runs the service as uid 65534 on a read-only root filesystem, with no capabilities', async () => {
    const d = deploymentOf(parseObjects(await helmTemplate('gr', 'ops')));
    const pod = d.spec.template.spec as Record<string, unknown> & {
      containers: Array<Record<string, unknown>>;
    };
    expect(d.spec.replicas).toBe(2);
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 65534,
      runAsGroup: 65534,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const c = pod.containers[0] as Record<string, unknown>;
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(c.resources).toEqual({
      requests: { cpu: '10m', memory: '64Mi' },
      limits: { cpu: '200m', memory: '256Mi' },
    });
    expect(c.env).toContainEqual({
      name: 'POD_NAMESPACE',
      valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } },
    });
    // The service reads (and, when missing, creates) its key Secret: the render holds no key.
    expect(c.args).toContain('--create-hash-key=true');
    expect(JSON.stringify(c.volumeMounts ?? [])).not.toContain('hash-key');
    expect(c.startupProbe).toMatchObject({
      httpGet: { path: '/readyz', port: 'http' },
      failureThreshold: 60,
    });
    expect(c.livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'http' } });
    expect(c.readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 'http' } });
  });

  plainIt(
    'renders the stalled-reload alert by default where the cluster serves PrometheusRules',
    async () => {
      const kinds = async (extra: string[]) =>
        parseObjects(
          (await run('helm', ['template', 'gr', chartDir, '--namespace', 'ops', ...extra])).stdout,
        ).map((o) => o.kind);
      // As Argo CD renders it: with the cluster's API versions.
      const withApi = await kinds(['--api-versions', 'monitoring.coreos.com/v1/PrometheusRule']);
      expect(withApi).toContain('PrometheusRule');
      const rule = parseObjects(
        (
          await run('helm', [
            'template',
            'gr',
            chartDir,
            '--namespace',
            'ops',
            '--api-versions',
            'monitoring.coreos.com/v1/PrometheusRule',
          ])
        ).stdout,
      ).find((o) => o.kind === 'PrometheusRule');
      expect(JSON.stringify(rule)).toContain('gitops_reloader_reload_stalls_total');
      // Where the API is not served, nothing that would fail the install.
      expect(await kinds([])).not.toContain('PrometheusRule');
      expect(
        await kinds([
          '--set',
          'prometheusRule.enabled=false',
          '--api-versions',
          'monitoring.coreos.com/v1/PrometheusRule',
        ]),
      ).not.toContain('PrometheusRule');
    },
  );

  plainIt('refuses values that would install something that cannot work', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['replicas=2', 'leaderElection.enabled=false'], /needs leaderElection\.enabled/],
      [['reload.defaultStrategy=annotate'], /needs rbac\.annotate/],
      [['reload.defaultStrategy=git'], /needs git\.enabled/],
      [['reload.defaultStrategy=restart', 'rbac.restart=false'], /needs rbac\.restart/],
      [['webhook.enabled=true'], /needs webhook\.tokenSecret\.name/],
      [['git.enabled=true'], /needs git\.credentialsSecret\.name/],
      [['reload.defaultStrategy=sometimes'], /defaultStrategy/],
    ];
    for (const [set, message] of cases) {
      await expect(helmTemplate('gr', 'ops', { set }), set.join(' ')).rejects.toThrow(message);
    }
  });
});

describe('the manifests on the control plane', () => {
  it('install with helm under the restricted Pod Security level, render no key, and grant what the service needs', async ({
    kube,
    namespace,
  }) => {
    const release = `gr-${suffix()}`;
    const fullname = `${release}-gitops-reloader`;
    await podSecurityRestricted(kube, namespace);
    try {
      await helm(['install', release, chartDir, '--namespace', namespace]);
      // The key is the service's to create (test/ha/key.test.ts); the chart renders none to rotate.
      const secrets = await kube.core.listNamespacedSecret({ namespace });
      expect(secrets.items.map((s) => s.metadata?.name)).not.toContain(`${fullname}-hash-key`);
      await helm(['upgrade', release, chartDir, '--namespace', namespace, '--set', 'logLevel=debug']);

      // The pods pass admission at the restricted level and get scheduled (kwok makes them Ready).
      const selector = `app.kubernetes.io/instance=${release}`;
      await waitFor(
        async () =>
          (await readyPods(kube, namespace, selector)) >= 2
            ? true
            : pending(await readyPods(kube, namespace, selector)),
        {
          describe: `2 Ready pods of ${fullname}`,
          timeout: 60_000,
        },
      );

      const sa = { namespace, name: fullname };
      await expectAccess(kube.kc, sa, {
        allowed: [
          'list secrets',
          'watch secrets',
          'get secrets in kube-system',
          'watch configmaps',
          'watch deployments.apps',
          'watch statefulsets.apps',
          'watch daemonsets.apps',
          'watch cronjobs.batch',
          'watch jobs.batch',
          'create jobs.batch in default',
          'delete jobs.batch in default',
          'list replicasets.apps in default',
          'create pods in default',
          'delete pods in default',
          'create pods/eviction in default',
          'create events in default',
          'patch rollouts.argoproj.io in default',
          'watch applications.argoproj.io in argocd',
          `create leases.coordination.k8s.io in ${namespace}`,
          `update leases.coordination.k8s.io ${fullname}-leader in ${namespace}`,
          `get leases.coordination.k8s.io ${fullname}-leader in ${namespace}`,
          `create configmaps in ${namespace}`,
          `patch configmaps ${fullname}-ledger-0 in ${namespace}`,
          `create secrets in ${namespace}`,
        ],
        denied: [
          'create secrets',
          'create secrets in default',
          'update secrets in default',
          `patch secrets ${fullname}-hash-key in ${namespace}`,
          'delete secrets in default',
          'patch deployments.apps in default',
          'update deployments.apps in default',
          'patch statefulsets.apps in default',
          'patch cronjobs.batch in default',
          'update cronjobs.batch in default',
          'patch jobs.batch in default',
          'update pods in default',
          // Events are created, never patched.
          'patch events in default',
          'patch configmaps in default',
          'create configmaps in default',
          `update leases.coordination.k8s.io someone-else in ${namespace}`,
          'update leases.coordination.k8s.io in default',
          'create leases.coordination.k8s.io in default',
          'list nodes',
          'list namespaces',
          'create clusterroles.rbac.authorization.k8s.io',
        ],
      });
    } finally {
      await helm(['uninstall', release, '--namespace', namespace]).catch(() => undefined);
    }
    expect(await clusterRoleExists(kube, fullname)).toBe(false);
  });

  it('apply every optional object of the chart (ServiceMonitor, PrometheusRule, NetworkPolicy, PDB)', async ({
    kube,
    namespace,
  }) => {
    await ensureMonitoringCrds(kube.kc);
    const release = `gr-${suffix()}`;
    const text = await helmTemplate(release, namespace, { values: [allFeaturesValues] });
    const kinds = parseObjects(text).map((o) => o.kind);
    for (const k of ['ServiceMonitor', 'PrometheusRule', 'NetworkPolicy', 'PodDisruptionBudget']) {
      expect(kinds, k).toContain(k);
    }
    try {
      // Server-side apply: the API server validates every object against its schema.
      await kubectl(['apply', '--server-side', '--field-manager=render-test', '-f', '-'], text);
      const got = await kubectl([
        'get',
        '-n',
        namespace,
        'servicemonitors,prometheusrules,networkpolicies,poddisruptionbudgets,deployments,services,roles,rolebindings',
        '-o',
        'name',
      ]);
      expect(got.stdout.trim().split('\n').length).toBe(8);
    } finally {
      await kubectl(['delete', '--ignore-not-found', '--wait=false', '-f', '-'], text);
    }
  });

  it('apply the Kustomize base under an overlay: pods admitted as restricted, RBAC renamed with it', async ({
    kube,
    namespace,
  }) => {
    const nameSuffix = `-${suffix()}`;
    const text = await kustomize({ namespace, nameSuffix });
    const objects = parseObjects(text);
    expect(objects.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name)).toEqual([namespace]);
    try {
      await kubectl(['apply', '--server-side', '--field-manager=render-test', '-f', '-'], text);
      await kube.core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: 'gitops-reloader-hash-key' },
          stringData: { key: randomBytes(32).toString('base64') },
        },
      });
      const selector = 'app.kubernetes.io/instance=gitops-reloader';
      await waitFor(
        async () =>
          (await readyPods(kube, namespace, selector)) >= 2
            ? true
            : pending(await readyPods(kube, namespace, selector)),
        {
          describe: '2 Ready pods from the Kustomize base',
          timeout: 60_000,
        },
      );
      const sa = { namespace, name: `gitops-reloader${nameSuffix}` };
      await expectAccess(kube.kc, sa, {
        allowed: [
          'watch secrets',
          'create pods/eviction in default',
          `patch configmaps gitops-reloader-ledger-3 in ${namespace}`,
        ],
        denied: ['create secrets', 'patch deployments.apps in default'],
      });
    } finally {
      // The namespaced objects go with the test namespace; the cluster-scoped ones do not.
      for (const kind of ['clusterrolebinding', 'clusterrole']) {
        await kubectl(['delete', kind, `gitops-reloader${nameSuffix}`, '--ignore-not-found']);
      }
    }
  });
});
