// Helpers for the manifest tests: run the helm and kubectl binaries built by test/cluster, render
// the chart, and read RBAC and container settings out of the rendered documents.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { clusterPaths, repoRoot } from '../cluster/paths.ts';

export const chartDir = path.join(repoRoot, 'manifests', 'chart', 'gitops-reloader');
export const installYaml = path.join(repoRoot, 'manifests', 'install.yaml');
export const installValues = path.join(repoRoot, 'manifests', 'install.values.yaml');
export const kustomizeBase = path.join(repoRoot, 'manifests', 'kustomize', 'base');
export const kustomizeBaseYaml = path.join(kustomizeBase, 'gitops-reloader.yaml');
export const allFeaturesValues = path.join(repoRoot, 'test', 'manifests', 'all-features.values.yaml');

/** The release and namespace install.yaml and the Kustomize base are rendered for. */
export const INSTALL_RELEASE = 'gitops-reloader';

export const INSTALL_COMMAND = `helm template ${INSTALL_RELEASE} manifests/chart/gitops-reloader --namespace ${INSTALL_RELEASE} -f manifests/install.values.yaml`;

/** The header of install.yaml and the Kustomize base file: how they were made. */
export const GENERATED_HEADER = `# Generated from the Helm chart in manifests/chart/gitops-reloader by:
#   ${INSTALL_COMMAND}
# Do not edit: change the chart, then run
#   UPDATE_MANIFESTS=1 npx vitest run --project integration test/manifests/render.test.ts
`;

function tool(name: 'helm' | 'kubectl'): string {
  const file = path.join(clusterPaths().bin, name);
  if (!existsSync(file)) {
    throw new Error(`${file} is missing: build it with \`npm run cluster -- build\``);
  }
  return file;
}

export interface RunResult {
  stdout: string;
  stderr: string;
}

/** Runs helm or kubectl; rejects with the command, exit code and stderr when it fails. */
export function run(
  name: 'helm' | 'kubectl',
  args: string[],
  o: { input?: string; cwd?: string; env?: Record<string, string> } = {},
): Promise<RunResult> {
  const file = tool(name);
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      {
        cwd: o.cwd ?? repoRoot,
        env: { ...process.env, ...o.env },
        maxBuffer: 64 * 1024 * 1024,
        timeout: 120_000,
      },
      (err, stdout, stderr) => {
        if (err) {
          reject(
            new Error(`${name} ${args.join(' ')} failed (${err.code ?? err.message}):\n${stderr || stdout}`),
          );
        } else resolve({ stdout, stderr });
      },
    );
    if (o.input !== undefined) child.stdin?.end(o.input);
  });
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

/** Parses a multi-document YAML stream; fails on any YAML error. */
export function parseObjects(text: string): K8sObject[] {
  const docs = parseAllDocuments(text);
  const out: K8sObject[] = [];
  for (const d of docs) {
    if (d.errors.length > 0) throw new Error(`invalid YAML: ${d.errors.map((e) => e.message).join('; ')}`);
    const v = d.toJS() as K8sObject | null;
    if (v) out.push(v);
  }
  return out;
}

/** `helm template` of the chart; `values` are files, `set` are --set pairs. */
export async function helmTemplate(
  release: string,
  namespace: string,
  o: { values?: string[]; set?: string[] } = {},
): Promise<string> {
  const args = ['template', release, chartDir, '--namespace', namespace];
  for (const v of o.values ?? []) args.push('-f', v);
  for (const s of o.set ?? []) args.push('--set', s);
  return (await run('helm', args)).stdout;
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

export interface Grant {
  role: string;
  scope: 'cluster' | 'namespace';
  group: string;
  resource: string;
  verb: string;
  resourceNames?: string[];
}

/** Every (group, resource, verb) that the Roles and ClusterRoles in `objects` grant. */
export function grants(objects: K8sObject[]): Grant[] {
  const out: Grant[] = [];
  for (const o of objects) {
    if (o.kind !== 'Role' && o.kind !== 'ClusterRole') continue;
    for (const r of (o.rules as PolicyRule[] | undefined) ?? []) {
      for (const group of r.apiGroups ?? ['']) {
        for (const resource of r.resources ?? []) {
          for (const verb of r.verbs) {
            out.push({
              role: `${o.kind}/${o.metadata.name}`,
              scope: o.kind === 'ClusterRole' ? 'cluster' : 'namespace',
              group,
              resource,
              verb,
              ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
            });
          }
        }
      }
    }
  }
  return out;
}

const SECRET_WRITE = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
const DANGEROUS = new Set(['escalate', 'bind', 'impersonate']);

/** Everything wrong with the RBAC in `objects`, in words; empty when it is least-privilege clean. */
export function rbacProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const o of objects) {
    if (o.kind !== 'Role' && o.kind !== 'ClusterRole') continue;
    if (o.aggregationRule) problems.push(`${o.kind}/${o.metadata.name} aggregates other roles`);
    for (const r of (o.rules as PolicyRule[] | undefined) ?? []) {
      const fields = [r.apiGroups, r.resources, r.verbs, r.resourceNames, r.nonResourceURLs];
      if (fields.some((f) => f?.some((v) => v.includes('*')))) {
        problems.push(`${o.kind}/${o.metadata.name} has a wildcard: ${JSON.stringify(r)}`);
      }
      if (r.nonResourceURLs) problems.push(`${o.kind}/${o.metadata.name} grants non-resource URLs`);
    }
  }
  for (const g of grants(objects)) {
    // The one Secret write allowed: create in the release namespace (the hash key the service makes
    // when it is missing, ADR 0014). Never update, patch or delete, and nowhere else.
    const createsKey = g.verb === 'create' && g.scope === 'namespace';
    if (g.group === '' && g.resource.split('/')[0] === 'secrets' && SECRET_WRITE.has(g.verb) && !createsKey) {
      problems.push(`${g.role} grants ${g.verb} on ${g.resource}`);
    }
    if (DANGEROUS.has(g.verb)) problems.push(`${g.role} grants ${g.verb} on ${g.resource}`);
  }
  return problems;
}

/** "group/resource" → sorted verbs, over every Role and ClusterRole of one scope. */
export function verbsByResource(objects: K8sObject[], scope: Grant['scope']): Record<string, string[]> {
  const out: Record<string, Set<string>> = {};
  for (const g of grants(objects)) {
    if (g.scope !== scope) continue;
    const key = g.group === '' ? g.resource : `${g.group}/${g.resource}`;
    out[key] ??= new Set();
    out[key].add(g.verb);
  }
  return Object.fromEntries(
    Object.entries(out)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => [k, [...v].sort()]),
  );
}

interface Container {
  name: string;
  args?: string[];
  securityContext?: Record<string, unknown>;
  [k: string]: unknown;
}

export function deploymentOf(objects: K8sObject[]): K8sObject & {
  spec: { replicas: number; template: { spec: { containers: Container[]; [k: string]: unknown } } };
} {
  const d = objects.filter((o) => o.kind === 'Deployment');
  if (d.length !== 1) throw new Error(`expected one Deployment, found ${d.length}`);
  return d[0] as ReturnType<typeof deploymentOf>;
}

/** The flag names (without --) the Deployment passes to `gitops-reloader serve`. */
export function serveFlagsUsed(objects: K8sObject[]): string[] {
  const args = deploymentOf(objects).spec.template.spec.containers[0]?.args ?? [];
  if (args[0] !== 'serve') throw new Error(`the container's first arg is ${args[0]}, not serve`);
  return args.slice(1).map((a) => {
    const m = /^--([a-z0-9-]+)(=|$)/.exec(a);
    if (!m?.[1]) throw new Error(`not a --flag=value argument: ${a}`);
    return m[1];
  });
}

/** helm against the test cluster (install, uninstall), with its own cache and config dirs. */
export function helmOnCluster(args: string[]): Promise<RunResult> {
  const home = path.join(tmpdir(), 'gr-helm-home');
  return run('helm', [...args, '--kubeconfig', inject('kubeconfig')], {
    env: {
      HELM_CACHE_HOME: path.join(home, 'cache'),
      HELM_CONFIG_HOME: path.join(home, 'config'),
      HELM_DATA_HOME: path.join(home, 'data'),
    },
  });
}
