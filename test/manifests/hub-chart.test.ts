// The chart with hub.enabled (docs/hub-mode.md), rendered by `helm template` as users install it: the
// Deployment runs `serve --hub=true`; the hub reads the cluster Secrets in Argo CD's first namespace
// and keeps each served cluster's Lease, ledger and hash key in its release namespace; the cluster it
// runs in is not served, so nothing there is granted for reloading. With hub.enabled off, the
// rendering is what it was before hub mode.
import { describe, expect, it } from 'vitest';
import { serveFlags } from '../../service/config/config.ts';
import {
  allFeaturesValues,
  deploymentOf,
  helmTemplate,
  type K8sObject,
  type PolicyRule,
  parseObjects,
  rbacProblems,
  serveFlagsUsed,
  verbsByResource,
} from './tools.ts';

const HUB = 'hub.enabled=true';
const FULLNAME = 'gr-gitops-reloader';

const render = async (set: string[] = [], values: string[] = []) =>
  parseObjects(await helmTemplate('gr', 'ops', { set, values }));

const named = (objects: K8sObject[], kind: string, name: string) =>
  objects.filter((o) => o.kind === kind && o.metadata.name === name);

const rulesOf = (o: K8sObject | undefined) => (o?.rules as PolicyRule[] | undefined) ?? [];

/** The rules of the Role in the release namespace (`ops`) named for the release. */
const releaseRoleRules = (objects: K8sObject[]) => {
  const roles = named(objects, 'Role', FULLNAME).filter((o) => o.metadata.namespace === 'ops');
  expect(roles).toHaveLength(1);
  return rulesOf(roles[0]);
};

/** What the reload rules grant in a cluster that is served: none of it belongs in the hub's own. */
const RELOAD_RESOURCES = [
  'configmaps',
  'secrets',
  'pods',
  'pods/eviction',
  'events',
  'apps/deployments',
  'apps/statefulsets',
  'apps/daemonsets',
  'apps/replicasets',
  'batch/jobs',
  'batch/cronjobs',
  'argoproj.io/rollouts',
  'secrets-store.csi.x-k8s.io/secretproviderclasses',
  'secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses',
];

describe('the Helm chart in hub mode', () => {
  it('runs `serve --hub=true` with hub.enabled, and not without', async () => {
    expect(serveFlags.map((f) => f.name)).toContain('hub');
    const args = (objects: K8sObject[]) => deploymentOf(objects).spec.template.spec.containers[0]?.args ?? [];
    expect(args(await render([HUB]))).toContain('--hub=true');
    expect(serveFlagsUsed(await render([HUB], [allFeaturesValues]))).toContain('hub');
    expect(serveFlagsUsed(await render())).not.toContain('hub');
    expect(serveFlagsUsed(await render(['hub.enabled=false']))).not.toContain('hub');
  });

  it('passes the allowed exec plugins (hub.execCommands) as --hub-exec-commands, and only absolute paths', async () => {
    const args = (objects: K8sObject[]) => deploymentOf(objects).spec.template.spec.containers[0]?.args ?? [];
    expect(args(await render([HUB, 'hub.execCommands={/usr/local/bin/login,/opt/x}']))).toContain(
      '--hub-exec-commands=/usr/local/bin/login,/opt/x',
    );
    expect(serveFlags.map((f) => f.name)).toContain('hub-exec-commands');
    expect(args(await render([HUB])).some((a) => a.startsWith('--hub-exec-commands'))).toBe(false);
    await expect(render([HUB, 'hub.execCommands={login}'])).rejects.toThrow(/execCommands/);
  });

  it('passes hub.standbyClusters as --hub-standby-clusters (default 8), a count from 0 to 1000', async () => {
    const args = (objects: K8sObject[]) => deploymentOf(objects).spec.template.spec.containers[0]?.args ?? [];
    expect(args(await render([HUB]))).toContain('--hub-standby-clusters=8');
    expect(args(await render([HUB, 'hub.standbyClusters=0']))).toContain('--hub-standby-clusters=0');
    expect(serveFlags.map((f) => f.name)).toContain('hub-standby-clusters');
    await expect(render([HUB, 'hub.standbyClusters=-1'])).rejects.toThrow(/standbyClusters/);
  });

  it("passes the hub's own write budget (hub.writeQps, hub.writeBurst; default 50 and 100)", async () => {
    const args = (objects: K8sObject[]) => deploymentOf(objects).spec.template.spec.containers[0]?.args ?? [];
    expect(args(await render([HUB]))).toEqual(
      expect.arrayContaining(['--hub-write-qps=50', '--hub-write-burst=100']),
    );
    expect(args(await render([HUB, 'hub.writeQps=5']))).toContain('--hub-write-qps=5');
    expect(serveFlags.map((f) => f.name)).toEqual(
      expect.arrayContaining(['hub-write-qps', 'hub-write-burst']),
    );
    await expect(render([HUB, 'hub.writeQps=0'])).rejects.toThrow(/writeQps/);
  });

  it("reads Secrets only in Argo CD's first namespace, with a Role <fullname>-hub bound to the ServiceAccount", async () => {
    const objects = await render([HUB, 'argocd.namespaces={argo-main,argo-apps}']);
    const roles = named(objects, 'Role', `${FULLNAME}-hub`);
    expect(roles.map((o) => o.metadata.namespace)).toEqual(['argo-main']);
    expect(rulesOf(roles[0])).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'] },
    ]);
    const bindings = named(objects, 'RoleBinding', `${FULLNAME}-hub`);
    expect(bindings).toHaveLength(1);
    expect(bindings[0]).toMatchObject({
      metadata: { namespace: 'argo-main' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${FULLNAME}-hub` },
      subjects: [{ kind: 'ServiceAccount', name: FULLNAME, namespace: 'ops' }],
    });
    // The default Argo CD namespace, and a ServiceAccount of another name.
    const other = await render([HUB, 'serviceAccount.name=reloader-sa']);
    expect(named(other, 'Role', `${FULLNAME}-hub`).map((o) => o.metadata.namespace)).toEqual(['argocd']);
    expect(named(other, 'RoleBinding', `${FULLNAME}-hub`)[0]?.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'reloader-sa', namespace: 'ops' },
    ]);
    // Nothing in Argo CD's other namespaces reads Secrets.
    const elsewhere = objects.filter(
      (o) => (o.kind === 'Role' || o.kind === 'ClusterRole') && o.metadata.namespace !== 'argo-main',
    );
    // (The release namespace's: the hash key, and our own credentials Secrets, listed and watched.)
    expect(verbsByResource(elsewhere, 'namespace').secrets).toEqual(['create', 'get', 'list', 'watch']);
    expect(rbacProblems(objects)).toEqual([]);
  });

  it('grants get, update, list, watch and delete on Leases in the release namespace (one per served cluster, one per replica), get on the hash key, and list and watch on Secrets there (our credentials Secrets)', async () => {
    const objects = await render([HUB]);
    const rules = releaseRoleRules(objects);
    const leases = rules.filter((r) => r.resources?.includes('leases'));
    expect(leases).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['get', 'update', 'list', 'watch', 'delete'],
      },
    ]);
    const secrets = rules.filter((r) => r.resources?.includes('secrets'));
    const ours = { apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch'] };
    expect(secrets).toEqual([
      ours,
      { apiGroups: [''], resources: ['secrets'], resourceNames: [`${FULLNAME}-hash-key`], verbs: ['get'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    ]);
    // The ledgers, job records and LeaseReleased Events of every served cluster live here too.
    expect(verbsByResource(named(objects, 'Role', FULLNAME), 'namespace')).toEqual({
      configmaps: ['create', 'delete', 'get', 'list', 'patch'],
      'coordination.k8s.io/leases': ['create', 'delete', 'get', 'list', 'update', 'watch'],
      events: ['create'],
      secrets: ['create', 'get', 'list', 'watch'],
    });
    // A hash key of your own is mounted: nothing to read or create (our credentials Secrets are still listed).
    const mine = releaseRoleRules(await render([HUB, 'hashKey.existingSecret=mine']));
    expect(mine.filter((r) => r.resources?.includes('secrets'))).toEqual([ours]);
    // A key you create yourself is read, never created.
    const yours = releaseRoleRules(await render([HUB, 'hashKey.create=false']));
    expect(yours.filter((r) => r.resources?.includes('secrets'))).toEqual([
      ours,
      { apiGroups: [''], resources: ['secrets'], resourceNames: [`${FULLNAME}-hash-key`], verbs: ['get'] },
    ]);
  });

  it("grants nothing in the hub's own cluster for reloading it: no ClusterRole rule on configs or workloads", async () => {
    for (const [name, objects] of [
      ['default values', await render([HUB])],
      ['all features', await render([HUB], [allFeaturesValues])],
      ['restart and annotate', await render([HUB, 'rbac.annotate=true', 'csiIntegration.enabled=true'])],
    ] as const) {
      const cluster = verbsByResource(objects, 'cluster');
      for (const r of RELOAD_RESOURCES)
        expect(cluster[r], `${name}: ClusterRole grants ${r}`).toBeUndefined();
      // What stays cluster-wide: the Applications the hub routes by destination.
      expect(cluster['argoproj.io/applications'], name).toEqual(['get', 'list', 'watch']);
      expect(rbacProblems(objects), name).toEqual([]);
    }
  });

  it('renders no per-namespace reload Roles for reload.namespaces (they name namespaces of the served clusters)', async () => {
    const objects = await render([HUB, 'reload.namespaces={team-a,team-b}']);
    expect(named(objects, 'Role', `${FULLNAME}-reload`)).toEqual([]);
    expect(named(objects, 'RoleBinding', `${FULLNAME}-reload`)).toEqual([]);
    expect(objects.filter((o) => ['team-a', 'team-b'].includes(o.metadata.namespace ?? ''))).toEqual([]);
    // No namespace selector: nothing cluster-wide at all.
    expect(objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding')).toEqual([]);
    // Argo CD's Applications and the cluster Secrets are still read, in Argo CD's namespace.
    const argocd = verbsByResource(
      objects.filter((o) => o.metadata.namespace === 'argocd'),
      'namespace',
    );
    expect(argocd['argoproj.io/applications']).toEqual(['get', 'list', 'watch']);
    expect(argocd.secrets).toEqual(['get', 'list', 'watch']);
    // And --namespaces still reaches the service: it limits the namespaces served in every cluster.
    expect(deploymentOf(objects).spec.template.spec.containers[0]?.args).toContain(
      '--namespaces=team-a,team-b',
    );
  });

  it('renders as before without hub.enabled: the Lease limited to its name, no hub Role, the reload rules granted', async () => {
    const byDefault = await render();
    expect(await render(['hub.enabled=false'])).toEqual(byDefault);
    const leases = releaseRoleRules(byDefault).filter(
      (r) => r.resources?.includes('leases') && (r.verbs.includes('get') || r.verbs.includes('update')),
    );
    expect(leases).toEqual([
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: [`${FULLNAME}-leader`],
        verbs: ['get', 'update'],
      },
    ]);
    // The hash key is read through the cluster-wide read of Secrets; no Role names it.
    expect(
      releaseRoleRules(byDefault).filter((r) => r.resourceNames?.includes(`${FULLNAME}-hash-key`)),
    ).toEqual([]);
    expect(byDefault.filter((o) => o.metadata.name === `${FULLNAME}-hub`)).toEqual([]);
    const cluster = verbsByResource(byDefault, 'cluster');
    expect(cluster.configmaps).toEqual(['get', 'list', 'watch']);
    expect(cluster.secrets).toEqual(['get', 'list', 'watch']);
    expect(cluster['apps/deployments']).toEqual(['get', 'list', 'watch']);
    const perNamespace = await render(['reload.namespaces={team-a,team-b}']);
    expect(
      named(perNamespace, 'Role', `${FULLNAME}-reload`)
        .map((o) => o.metadata.namespace)
        .sort(),
    ).toEqual(['team-a', 'team-b']);
  });
});
