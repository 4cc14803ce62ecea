// The config-management plugin (argocd-plugin/cmp), run the way argocd-cmp-server runs it: the
// plugin.yaml's generate command (command + args) in the Application's source directory, with the
// sidecar's environment plus Argo CD's build variables and parameters. kustomize and helm are the
// binaries test/cluster builds; `gitops-reloader` is this checkout's CLI. The rendered workloads must
// carry the checksum the service computes (setDigest over the HMACs, namespace from ARGOCD_APP_NAMESPACE).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { hashConfig, namespaceKey, setDigest } from '../../service/core/config-hash.ts';
import { configId } from '../../service/core/types.ts';
import { clusterPaths, repoRoot } from '../cluster/paths.ts';

const CMP = path.join(repoRoot, 'argocd-plugin', 'cmp');
const ANNOTATION = 'gitops-reloader.io/config-hash';
const NAMESPACE = 'shop-prod';

interface Command {
  command: string[];
  args?: string[];
}
interface PluginConfig {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: Record<string, unknown> & { init?: Command; generate: Command };
}

type K8s = {
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  data?: Record<string, string>;
  spec?: {
    template?: { metadata?: { annotations?: Record<string, string> } };
  };
};

let plugin: PluginConfig;
let scratch: string;
let bin: string;
let keyFile: string;
let key: Buffer;

beforeAll(async () => {
  plugin = parse(await readFile(path.join(CMP, 'plugin.yaml'), 'utf8')) as PluginConfig;
  scratch = await mkdtemp(path.join(tmpdir(), 'cmp-'));
  // What the sidecar's image provides: /usr/local/bin/gitops-reloader runs the CLI.
  bin = path.join(scratch, 'bin');
  await mkdir(bin);
  await writeFile(
    path.join(bin, 'gitops-reloader'),
    `#!/bin/sh\nexec "${process.execPath}" "${path.join(repoRoot, 'service', 'cli.ts')}" "$@"\n`,
    { mode: 0o755 },
  );
  // The service's hash key, as the mounted Secret holds it.
  keyFile = path.join(scratch, 'key');
  await writeFile(keyFile, `${randomBytes(24).toString('hex')}\n`, { mode: 0o600 });
  key = Buffer.from((await readFile(keyFile, 'utf8')).replace(/\s+$/, ''), 'utf8');
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function writeTree(dir: string, files: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), text);
  }
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one of the plugin's commands as argocd-cmp-server does: exec command[0] with command[1:] + args, in the app dir. */
function runCommand(c: Command, appDir: string, env: Record<string, string>): Promise<Run> {
  const [file, ...rest] = c.command;
  return new Promise((resolve) => {
    execFile(
      file as string,
      [...rest, ...(c.args ?? [])],
      { cwd: appDir, env, maxBuffer: 64 * 1024 * 1024, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** init then generate, with the sidecar's environment, the build environment and parameters. */
async function generate(
  files: Record<string, string>,
  o: { params?: Record<string, string>; extraBin?: string } = {},
): Promise<Run & { docs: K8s[] }> {
  const appDir = await mkdtemp(path.join(scratch, 'app-'));
  await writeTree(appDir, files);
  const home = await mkdtemp(path.join(scratch, 'home-'));
  const env: Record<string, string> = {
    // The sidecar's own environment (repo-server-patch.yaml).
    PATH: [o.extraBin, bin, clusterPaths().bin, '/usr/local/bin', '/usr/bin', '/bin']
      .filter(Boolean)
      .join(':'),
    HOME: home,
    GITOPS_RELOADER_HASH_KEY_FILE: keyFile,
    // Argo CD's build environment.
    ARGOCD_APP_NAME: 'web',
    ARGOCD_APP_NAMESPACE: NAMESPACE,
    ARGOCD_APP_REVISION: 'f00dbabe',
    ARGOCD_APP_SOURCE_PATH: 'apps/web',
    ARGOCD_APP_SOURCE_REPO_URL: 'https://git.example.com/shop.git',
    ARGOCD_APP_SOURCE_TARGET_REVISION: 'main',
    KUBE_VERSION: '1.33',
    KUBE_API_VERSIONS: 'v1,apps/v1,batch/v1',
    ...o.params,
  };
  if (plugin.spec.init?.command?.length) {
    const init = await runCommand(plugin.spec.init, appDir, env);
    if (init.code !== 0) return { ...init, docs: [] };
  }
  const r = await runCommand(plugin.spec.generate, appDir, env);
  const docs = r.code === 0 ? parseAllDocuments(r.stdout).map((d) => d.toJS() as K8s) : [];
  return { ...r, docs: docs.filter(Boolean) };
}

const find = (docs: K8s[], kind: string, name?: string) =>
  docs.find((d) => d.kind === kind && (name === undefined || d.metadata.name === name));

/** What gitops-reloader serve writes for a workload that uses all of one ConfigMap. */
function expected(config: K8s): string {
  const id = configId({ kind: 'ConfigMap', namespace: NAMESPACE, name: config.metadata.name });
  return setDigest(
    { [id]: hashConfig({ data: config.data ?? {} }, namespaceKey(key, NAMESPACE)).all },
    namespaceKey(key, NAMESPACE),
  );
}

const deployment = (name: string, config: string) => `# ${name}: keep this comment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  selector:
    matchLabels: {app: ${name}}
  template:
    metadata:
      labels: {app: ${name}}
    spec:
      containers:
        - name: app
          image: registry.invalid/app:1
          envFrom:
            - configMapRef: {name: ${config}}
`;

const CONFIG = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  mode: "fast"   # tuned for prod
`;

describe('the config-management plugin', () => {
  it('is a ConfigManagementPlugin v2 that the CMP server accepts', () => {
    expect(plugin.apiVersion).toBe('argoproj.io/v1alpha1');
    expect(plugin.kind).toBe('ConfigManagementPlugin');
    expect(plugin.metadata.name).toBe('gitops-reloader-checksum');
    expect(plugin.spec.generate.command.length).toBeGreaterThan(0);
    // The fields of Argo CD's PluginConfigSpec; spec.version is deprecated (name the plugin instead).
    const known = ['init', 'generate', 'discover', 'parameters', 'preserveFileMode', 'provideGitCreds'];
    expect(Object.keys(plugin.spec).filter((k) => !known.includes(k))).toEqual([]);
    const announcement = [
      'name',
      'title',
      'tooltip',
      'required',
      'itemType',
      'collectionType',
      'string',
      'array',
      'map',
    ];
    const params = plugin.spec.parameters as { static: Array<Record<string, unknown>> };
    for (const p of params.static)
      expect(Object.keys(p).filter((k) => !announcement.includes(k))).toEqual([]);
    // Credentials of the repo server stay there.
    expect(plugin.spec.provideGitCreds).toBeUndefined();
  });

  it('renders a plain YAML directory with the checksum, leaving everything else as it was', async () => {
    const r = await generate({
      'configmap.yaml': CONFIG,
      'deployment.yaml': deployment('web', 'web-config'),
      'nested/worker.yaml': deployment('worker', 'web-config'),
      'README.md': '# not a manifest\n',
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const value = expected(find(r.docs, 'ConfigMap') as K8s);
    expect(find(r.docs, 'Deployment', 'web')?.spec?.template?.metadata?.annotations?.[ANNOTATION]).toBe(
      value,
    );
    expect(find(r.docs, 'Deployment', 'worker')?.spec?.template?.metadata?.annotations?.[ANNOTATION]).toBe(
      value,
    );
    // The ConfigMap's text (and its comment) is passed through byte for byte.
    expect(r.stdout).toContain(CONFIG);
    expect(r.stdout).toContain('# web: keep this comment');
  });

  it('renders a Kustomize directory (generated ConfigMap name and all) with the checksum', async () => {
    const files = {
      'kustomization.yaml': `resources:
  - deployment.yaml
configMapGenerator:
  - name: web-config
    literals:
      - mode=fast
`,
      'deployment.yaml': deployment('web', 'web-config'),
    };
    // No kustomize binary on PATH: the plugin falls back to `kubectl kustomize`.
    const r = await generate(files);
    expect(r.code, r.stderr).toBe(0);
    const config = find(r.docs, 'ConfigMap') as K8s;
    expect(config.metadata.name).toMatch(/^web-config-[a-z0-9]{10}$/);
    const web = find(r.docs, 'Deployment', 'web');
    expect(web?.spec?.template?.metadata?.annotations?.[ANNOTATION]).toBe(expected(config));

    // In the sidecar, `kustomize build .` runs (Argo CD's binary); the result is the same.
    const shim = await mkdtemp(path.join(scratch, 'kustomize-'));
    await writeFile(
      path.join(shim, 'kustomize'),
      `#!/bin/sh\n[ "$1" = build ] || exit 64\nexec "${path.join(clusterPaths().bin, 'kubectl')}" kustomize "$2"\n`,
      { mode: 0o755 },
    );
    const viaKustomize = await generate(files, { extraBin: shim });
    expect(viaKustomize.code, viaKustomize.stderr).toBe(0);
    expect(viaKustomize.stdout).toBe(r.stdout);
  });

  it('renders a Helm chart with the values files given as parameters, the last one winning', async () => {
    const r = await generate(
      {
        'Chart.yaml': 'apiVersion: v2\nname: web\nversion: 0.1.0\n',
        'values.yaml': 'mode: slow\n',
        'values-prod.yaml': 'mode: fast\n',
        'templates/configmap.yaml': `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  mode: {{ .Values.mode | quote }}
`,
        'templates/deployment.yaml': deployment('{{ .Release.Name }}', '{{ .Release.Name }}-config'),
      },
      { params: { PARAM_VALUES_FILES_0: 'values.yaml', PARAM_VALUES_FILES_1: 'values-prod.yaml' } },
    );
    expect(r.code, r.stderr).toBe(0);
    const config = find(r.docs, 'ConfigMap', 'web-config') as K8s;
    expect(config.data).toEqual({ mode: 'fast' });
    expect(find(r.docs, 'Deployment', 'web')?.spec?.template?.metadata?.annotations?.[ANNOTATION]).toBe(
      expected(config),
    );
  });

  it('names the Helm release after the Application without its namespace prefix, as Argo CD does', async () => {
    // For an Application outside Argo CD's namespace, the repo-server passes ARGOCD_APP_NAME as its
    // instance name, <appNamespace>_<app> (controller/state.go: app.InstanceName), and its own Helm
    // support uses only the part after the first "_" (repository.go helmTemplate:
    // argo.ParseInstanceName). A release name with "_" is one helm refuses.
    const r = await generate(
      {
        'Chart.yaml': 'apiVersion: v2\nname: web\nversion: 0.1.0\n',
        'values.yaml': 'mode: fast\n',
        'templates/configmap.yaml': `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  mode: {{ .Values.mode | quote }}
`,
        'templates/deployment.yaml': deployment('{{ .Release.Name }}', '{{ .Release.Name }}-config'),
      },
      { params: { ARGOCD_APP_NAME: 'team-a_web' } },
    );
    expect(r.code, r.stderr).toBe(0);
    const config = find(r.docs, 'ConfigMap', 'web-config') as K8s;
    expect(config).toBeDefined();
    expect(find(r.docs, 'Deployment', 'web')?.spec?.template?.metadata?.annotations?.[ANNOTATION]).toBe(
      expected(config),
    );
  });

  it('writes the annotation key given as a parameter', async () => {
    const r = await generate(
      { 'configmap.yaml': CONFIG, 'deployment.yaml': deployment('web', 'web-config') },
      { params: { PARAM_ANNOTATION: 'checksum/config' } },
    );
    expect(r.code, r.stderr).toBe(0);
    const annotations = find(r.docs, 'Deployment', 'web')?.spec?.template?.metadata?.annotations;
    expect(annotations).toEqual({ 'checksum/config': expected(find(r.docs, 'ConfigMap') as K8s) });
  });

  it('fails, printing nothing, when the render fails (so Argo CD never prunes on an empty render)', async () => {
    const r = await generate({ 'kustomization.yaml': 'resources:\n  - missing.yaml\n' });
    expect(r.code).not.toBe(0);
    expect(r.stdout.trim()).toBe('');
  });

  it("refuses a manifest that names another namespace, so no tenant can compute that namespace's values", async () => {
    // A guess at another team's low-entropy Secret, placed in that team's namespace, and a workload
    // there that uses it: the plugin must not print a value to compare with that team's annotation.
    const guess = `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: payments}
stringData: {PIN: "1234"}
`;
    const probe = deployment('probe', 'db')
      .replace('name: probe\n', 'name: probe\n  namespace: payments\n')
      .replace('configMapRef: {name: db}', 'secretRef: {name: db}');
    const r = await generate({ 'secret.yaml': guess, 'deployment.yaml': probe });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /(Secret db|Deployment probe) names namespace payments; this render is confined to shop-prod/,
    );

    // Without a destination namespace there is nothing to confine to: refused too.
    const none = await generate({ 'configmap.yaml': CONFIG }, { params: { ARGOCD_APP_NAMESPACE: '' } });
    expect(none.code).toBe(2);
    expect(none.stdout).toBe('');
  });

  it.each([
    ['an absolute path', keyFileParam],
    ['a path out of the chart', () => '../../etc/passwd'],
  ])('refuses a values file that is %s', async (_what, value) => {
    const r = await generate(
      { 'Chart.yaml': 'apiVersion: v2\nname: web\nversion: 0.1.0\n', 'templates/cm.yaml': CONFIG },
      { params: { PARAM_VALUES_FILES_0: value() } },
    );
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/must be a relative path inside the chart/);
  });
});

function keyFileParam(): string {
  return keyFile;
}

describe('the argocd-repo-server sidecar', () => {
  /** A stand-in for Argo CD's install: the repo server with the volumes the CMP contract relies on. */
  const REPO_SERVER = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-repo-server
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: argocd-repo-server}
  template:
    metadata:
      labels: {app.kubernetes.io/name: argocd-repo-server}
    spec:
      initContainers:
        - name: copyutil
          image: quay.io/argoproj/argocd:v3.5.1
          command: [/bin/cp, -n, /usr/local/bin/argocd, /var/run/argocd/argocd-cmp-server]
          volumeMounts: [{name: var-files, mountPath: /var/run/argocd}]
      containers:
        - name: argocd-repo-server
          image: quay.io/argoproj/argocd:v3.5.1
          volumeMounts:
            - {name: var-files, mountPath: /var/run/argocd}
            - {name: plugins, mountPath: /home/argocd/cmp-server/plugins}
      volumes:
        - {name: var-files, emptyDir: {}}
        - {name: plugins, emptyDir: {}}
`;

  interface Container {
    name: string;
    image: string;
    command?: string[];
    env?: Array<{ name: string; value?: string }>;
    securityContext?: Record<string, unknown>;
    volumeMounts?: Array<{ name: string; mountPath: string; subPath?: string; readOnly?: boolean }>;
  }
  interface PodSpec {
    initContainers: Container[];
    containers: Container[];
    volumes: Array<{ name: string; configMap?: { name: string }; secret?: { secretName: string } }>;
  }

  it('adds the plugin as a sidecar running our image under argocd-cmp-server, as a Kustomize component', async () => {
    const dir = await mkdtemp(path.join(scratch, 'argocd-'));
    await writeTree(dir, {
      'repo-server.yaml': REPO_SERVER,
      'kustomization.yaml': `namespace: argocd
resources:
  - repo-server.yaml
components:
  - ${path.relative(dir, CMP)}
`,
    });
    const out = await new Promise<string>((resolve, reject) =>
      execFile(path.join(clusterPaths().bin, 'kubectl'), ['kustomize', dir], (err, stdout, stderr) =>
        err ? reject(new Error(stderr)) : resolve(stdout),
      ),
    );
    const docs = parseAllDocuments(out).map((d) => d.toJS()) as Array<K8s & { spec?: unknown }>;
    const cm = docs.find((d) => d.kind === 'ConfigMap') as K8s;
    expect(cm.metadata.name).toMatch(/^gitops-reloader-cmp-plugin-[a-z0-9]{10}$/);
    expect(cm.metadata.namespace).toBe('argocd');
    expect(cm.data?.['plugin.yaml']).toBe(await readFile(path.join(CMP, 'plugin.yaml'), 'utf8'));

    const deploy = docs.find((d) => d.kind === 'Deployment') as unknown as {
      spec: { template: { metadata?: { annotations?: Record<string, string> }; spec: PodSpec } };
    };
    const pod = deploy.spec.template.spec;
    // Argo CD's own containers, init containers and volumes are kept.
    expect(pod.containers.map((c) => c.name).sort()).toEqual(['argocd-repo-server', 'gitops-reloader-cmp']);
    expect(pod.initContainers.map((c) => c.name).sort()).toEqual(['copyutil', 'gitops-reloader-cmp-tools']);
    expect(pod.volumes.map((v) => v.name)).toEqual(expect.arrayContaining(['var-files', 'plugins']));
    // A strategic-merge patch puts the sidecar first; kubectl logs and exec still default to the repo server.
    expect(deploy.spec.template.metadata?.annotations?.['kubectl.kubernetes.io/default-container']).toBe(
      'argocd-repo-server',
    );
    const sidecar = pod.containers.find((c) => c.name === 'gitops-reloader-cmp') as Container;
    const chart = parse(
      await readFile(path.join(repoRoot, 'manifests', 'chart', 'gitops-reloader', 'Chart.yaml'), 'utf8'),
    ) as { appVersion: string };
    expect(sidecar.image).toBe(`ghcr.io/gitops-reloader/gitops-reloader:${chart.appVersion}`);
    expect(sidecar.command).toEqual(['/var/run/argocd/argocd-cmp-server']);
    expect(sidecar.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 999 });

    const mount = (p: string) => sidecar.volumeMounts?.find((m) => m.mountPath === p);
    const volume = (name: string | undefined) => pod.volumes.find((v) => v.name === name);
    expect(mount('/var/run/argocd')?.name).toBe('var-files');
    expect(mount('/home/argocd/cmp-server/plugins')?.name).toBe('plugins');
    const config = mount('/home/argocd/cmp-server/config/plugin.yaml');
    expect(config?.subPath).toBe('plugin.yaml');
    // The volume follows the generated ConfigMap's hashed name, so a plugin change restarts the pod.
    expect(volume(config?.name)?.configMap?.name).toBe(cm.metadata.name);
    // Its own /tmp, not the repo server's.
    expect(volume(mount('/tmp')?.name)).toMatchObject({ emptyDir: {} });

    // The key file the plugin reads is the mounted hash-key Secret.
    const env = Object.fromEntries((sidecar.env ?? []).map((e) => [e.name, e.value]));
    const keyPath = env.GITOPS_RELOADER_HASH_KEY_FILE as string;
    const keyMount = sidecar.volumeMounts?.find((m) => keyPath.startsWith(`${m.mountPath}/`));
    expect(keyMount?.readOnly).toBe(true);
    expect(volume(keyMount?.name)?.secret?.secretName).toBe('gitops-reloader-hash-key');
    // helm and kustomize: copied from Argo CD's image into a volume that is first on the sidecar's PATH.
    const tools = pod.initContainers.find((c) => c.name === 'gitops-reloader-cmp-tools') as Container;
    expect(tools.command?.slice(1, 3)).toEqual(['/usr/local/bin/helm', '/usr/local/bin/kustomize']);
    const toolsVolume = tools.volumeMounts?.[0]?.name;
    const toolsPath = sidecar.volumeMounts?.find((m) => m.name === toolsVolume)?.mountPath;
    expect(env.PATH?.split(':')[0]).toBe(toolsPath);
    expect(env.PATH?.split(':')).toContain('/usr/local/bin');
  });
});
