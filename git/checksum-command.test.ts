import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { DEFAULT_GLOBALS, parseWorkloadPolicy } from '../service/core/annotations.ts';
import { clusterKey, keyFingerprint, namespaceKey, setDigest } from '../service/core/config-hash.ts';
import { type ConfigLookup, watchedSet } from '../service/core/plan.ts';
import { formatTenantKey, parseTenantKey, tenantKeys } from '../service/core/tenant-key.ts';
import { configId } from '../service/core/types.ts';
import { configRecord, workloadRecord } from '../service/kube/to-record.ts';
import { SERVICE_KEY_ANNOTATION, tenantKey } from '../service/tenant-key-command.ts';
import { checksum } from './checksum-command.ts';
import { injectChecksums } from './checksums.ts';

const KEY_TEXT = 'k'.repeat(40);
const KEY = Buffer.from(KEY_TEXT);
const ANN = 'gitops-reloader.io/config-hash';

const STREAM = `# rendered by kustomize
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: shop
data:
  LOG_LEVEL: info
  port: "8080"
---
apiVersion: v1
kind: Secret
metadata:
  name: web-secret
  namespace: shop
type: Opaque
stringData:
  PIN: "1234"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  annotations:
    reloader.stakater.com/auto: "true"
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}   # keep
    spec:
      containers:
        - name: web
          image: 'web:1'
          envFrom: [{configMapRef: {name: web-config}}]
          env:
            - name: PIN
              valueFrom: {secretKeyRef: {name: web-secret, key: PIN}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: other, namespace: shop}
spec:
  template:
    spec:
      containers: [{name: c, image: x, envFrom: [{configMapRef: {name: not-in-this-set}}]}]
`;

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    write: (s: string) => out.push(s),
    io: (stdin = '') => ({ readStdin: async () => stdin, err: (s: string) => err.push(s) }),
  };
}

let dir: string;
let keyFile: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'checksum-test-'));
  keyFile = path.join(dir, 'hash-key');
  await writeFile(keyFile, `${KEY_TEXT}\n`);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * The service's path for `web` in STREAM: live objects (the API server turns stringData into base64
 * data) → records → watched set (auto) → the usage digests it publishes a value of.
 */
function serviceDigests(serviceKey: Buffer): Record<string, string> {
  const docs = parseAllDocuments(STREAM).map((d) => d.toJS());
  const cm = configRecord(
    'ConfigMap',
    { ...docs[0], metadata: { ...docs[0].metadata, uid: '1' } },
    serviceKey,
  );
  const secret = configRecord(
    'Secret',
    {
      metadata: { name: 'web-secret', namespace: 'shop', uid: '2' },
      data: { PIN: Buffer.from('1234').toString('base64') },
    },
    serviceKey,
  );
  const w = workloadRecord('Deployment', { ...docs[2], metadata: { ...docs[2].metadata, uid: '3' } });
  if (!cm || !secret || !w) throw new Error('records');
  const byId = new Map([cm, secret].map((c) => [configId(c.ref), c]));
  const lookup: ConfigLookup = { get: (ref) => byId.get(configId(ref)), inNamespace: () => [] };
  const policy = parseWorkloadPolicy(w.annotations, w.templateAnnotations, {
    kind: 'Deployment',
    defaultStrategy: 'restart',
  });
  return watchedSet(w, policy, lookup, DEFAULT_GLOBALS).digests;
}

/** The value the service publishes for `web`: keyed with the workload namespace's key (ADR 0010). */
const serviceValue = (serviceKey: Buffer) =>
  setDigest(serviceDigests(serviceKey), namespaceKey(serviceKey, 'shop'));

describe('a namespace key (gitops-reloader tenant-key), without the service key', () => {
  const written = (r: ReturnType<typeof injectChecksums>) => r.workloads.find((w) => w.name === 'web')?.hash;

  it("computes exactly the value the service publishes for the key's namespace", () => {
    const tenant = tenantKeys(parseTenantKey(formatTenantKey(KEY, 'shop')));
    const r = injectChecksums([{ name: '-', text: STREAM }], tenant, {
      annotation: ANN,
      namespace: 'shop',
      confine: true,
    });
    expect(written(r)).toBe(serviceValue(KEY));
  });

  it("cannot compute another namespace's values, even with the line's namespace rewritten", () => {
    const other = STREAM.replaceAll('namespace: shop', 'namespace: payments');
    const truth = injectChecksums([{ name: '-', text: other }], KEY, { annotation: ANN });
    const shopKey = parseTenantKey(formatTenantKey(KEY, 'shop'));
    // Asked for payments, the shop key refuses.
    expect(() =>
      injectChecksums([{ name: '-', text: other }], tenantKeys(shopKey), { annotation: ANN }),
    ).toThrow(/for namespace shop; it cannot compute values for namespace payments/);
    // The shop key's bytes under a line that claims payments: values, but not payments' values.
    const forged = tenantKeys({ namespace: 'payments', key: shopKey.key });
    const guessed = injectChecksums([{ name: '-', text: other }], forged, { annotation: ANN });
    expect(written(guessed)).toMatch(/^[0-9a-f]{32}$/);
    expect(written(guessed)).not.toBe(written(truth));
    // And nothing about the service key: two namespaces' keys are unrelated to it and to each other.
    const paymentsKey = parseTenantKey(formatTenantKey(KEY, 'payments')).key;
    expect(paymentsKey.equals(shopKey.key)).toBe(false);
    expect(shopKey.key.includes(KEY)).toBe(false);
  });

  it('hub mode: --cluster-server gives the key of that served cluster, whose values are that engine’s and no other cluster’s', async () => {
    const keyOf = (args: string[]) => {
      const c = capture();
      expect(tenantKey(['--namespace', 'shop', '--key-file', keyFile, ...args], {}, c.write, c.write)).toBe(
        0,
      );
      return parseTenantKey(c.out.join('').trim()).key;
    };
    const a = keyOf(['--cluster-server', 'https://A.example:443/']);
    // The canonical server: spellings of one server are one cluster.
    expect(a.equals(keyOf(['--cluster-server', 'https://a.example']))).toBe(true);
    const engineA = namespaceKey(clusterKey(KEY, 'https://a.example'), 'shop');
    expect(a.equals(engineA)).toBe(true);
    expect(a.equals(keyOf(['--cluster-server', 'https://b.example']))).toBe(false);
    expect(a.equals(keyOf([]))).toBe(false);
    const bad = capture();
    expect(
      tenantKey(
        ['--namespace', 'shop', '--key-file', keyFile, '--cluster-server', 'https://0x7f.1'],
        {},
        bad.write,
        bad.write,
      ),
    ).toBe(2);
  });

  it('runs as checksum --namespace-key-file: --check passes on what --in-place wrote, confined to its namespace', async () => {
    const nsKey = path.join(dir, 'shop.key');
    const printed = capture();
    expect(tenantKey(['--namespace', 'shop', '--key-file', keyFile], {}, printed.write, printed.write)).toBe(
      0,
    );
    await writeFile(nsKey, printed.out.join(''));
    const repo = path.join(dir, 'repo');
    await mkdir(repo);
    await writeFile(path.join(repo, 'all.yaml'), STREAM);
    const c = capture();
    expect(await checksum([repo, '--in-place', '--namespace-key-file', nsKey], {}, c.write, c.io())).toBe(0);
    expect(
      parseAllDocuments(await readFile(path.join(repo, 'all.yaml'), 'utf8'))[2]?.toJS().spec.template.metadata
        .annotations[ANN],
    ).toBe(serviceValue(KEY));
    expect(await checksum([repo, '--check', '--namespace-key-file', nsKey], {}, c.write, c.io())).toBe(0);
    // The same repository checked with another namespace's key is stale, and says so.
    const other = capture();
    tenantKey(['--namespace', 'payments', '--key-file', keyFile], {}, other.write, other.write);
    await writeFile(nsKey, other.out.join(''));
    const stale = capture();
    expect(
      await checksum([repo, '--check', '--namespace-key-file', nsKey], {}, stale.write, stale.io()),
    ).toBe(1);
    expect(stale.err.join('')).toMatch(/names namespace shop; this render is confined to payments/);
    // A key and --namespace that disagree, or both keys: a usage error, not a wrong value.
    const both = capture();
    expect(
      await checksum(
        [repo, '--check', '--namespace-key-file', nsKey, '--namespace', 'shop'],
        {},
        both.write,
        both.io(),
      ),
    ).toBe(2);
    expect(
      await checksum(
        [repo, '--check', '--namespace-key-file', nsKey, '--key-file', keyFile],
        {},
        both.write,
        both.io(),
      ),
    ).toBe(2);
  });

  it('reads the line strictly and never repeats it in an error', () => {
    const line = formatTenantKey(KEY, 'shop');
    expect(line).toMatch(/^gitops-reloader-namespace-key:v1:shop:[A-Za-z0-9+/]{43}=$/);
    for (const bad of [
      line.replace(':shop:', ':Shop:'),
      line.slice(0, -4),
      `x${line}`,
      line.replace(':v1:', ':v2:'),
    ]) {
      expect(() => parseTenantKey(bad)).toThrow();
      try {
        parseTenantKey(bad);
      } catch (err) {
        expect((err as Error).message).not.toContain(line.split(':')[3]?.slice(0, 12));
      }
    }
    const e = capture();
    expect(tenantKey(['--namespace', 'Bad_NS', '--key-file', keyFile], {}, e.write, e.write)).toBe(2);
  });

  it('prints a Secret per namespace, stamped with the fingerprint of the service key it came from', () => {
    const c = capture();
    expect(
      tenantKey(
        ['--namespace', 'shop,payments', '--key-file', keyFile, '--secret', 'ci-key'],
        {},
        c.write,
        c.write,
      ),
    ).toBe(0);
    const docs = parseAllDocuments(c.out.join('')).map((d) => d.toJS());
    expect(docs.map((d) => [d.metadata.namespace, d.metadata.name])).toEqual([
      ['shop', 'ci-key'],
      ['payments', 'ci-key'],
    ]);
    expect(docs[0].metadata.annotations[SERVICE_KEY_ANNOTATION]).toBe(keyFingerprint(KEY));
    expect(parseTenantKey(docs[1].stringData.key).namespace).toBe('payments');
    expect(c.out.join('')).not.toContain(KEY_TEXT);
  });
});

describe('injectChecksums', () => {
  it('writes the value the service computes for the same live objects', () => {
    const r = injectChecksums([{ name: '-', text: STREAM }], KEY, { annotation: ANN });
    const docs = parseAllDocuments(r.sources[0]?.text ?? '').map((d) => d.toJS());
    const written = docs[2].spec.template.metadata.annotations[ANN];
    expect(written).toBe(serviceValue(KEY));
    expect(written).not.toBe(setDigest(serviceDigests(KEY), KEY));
    expect(r.workloads.map((x) => x.name)).toEqual(['web']);
  });

  it('confined to a namespace, refuses a config or workload that names another', () => {
    expect(() =>
      injectChecksums([{ name: '-', text: STREAM }], KEY, {
        annotation: ANN,
        namespace: 'other',
        confine: true,
      }),
    ).toThrow(/names namespace shop; this render is confined to other/);
    const r = injectChecksums([{ name: '-', text: STREAM }], KEY, {
      annotation: ANN,
      namespace: 'shop',
      confine: true,
    });
    expect(r.workloads.map((x) => x.name)).toEqual(['web']);
  });

  it('gives the same objects in two namespaces unrelated values', () => {
    const unnamed = STREAM.replace(/\n\s*namespace: shop/g, '');
    const hashIn = (ns: string) =>
      injectChecksums([{ name: '-', text: unnamed }], KEY, { annotation: ANN, namespace: ns }).workloads[0]
        ?.hash;
    expect(hashIn('team-a')).toMatch(/^[0-9a-f]{32}$/);
    expect(hashIn('team-a')).not.toBe(hashIn('team-b'));
  });

  it('changes nothing but the annotation lines, and nothing for a workload whose configs are elsewhere', () => {
    const r = injectChecksums([{ name: '-', text: STREAM }], KEY, { annotation: ANN });
    const text = r.sources[0]?.text ?? '';
    const added = text.split('\n').filter((l) => !STREAM.split('\n').includes(l));
    expect(added).toEqual([
      '      annotations:',
      expect.stringMatching(new RegExp(`^        ${ANN}: "?[0-9a-f]{32}"?$`)),
    ]);
    expect(text.replace(/\n {6}annotations:\n {8}.*\n/, '\n')).toBe(STREAM);
  });

  it('hashes a Secret with the key: not sha256 of its data, stable for one key, different for another', () => {
    const value = (key: Buffer) =>
      parse(
        injectChecksums(
          [
            {
              name: '-',
              text: `apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {PIN: ${Buffer.from('1234').toString('base64')}}\n---\nkind: Deployment\napiVersion: apps/v1\nmetadata: {name: d}\nspec: {template: {spec: {volumes: [{name: v, secret: {secretName: s}}]}}}\n`,
            },
          ],
          key,
          { annotation: ANN },
        ).sources[0]?.text.split('---\n')[1] ?? '',
      ).spec.template.metadata.annotations[ANN] as string;
    const a = value(KEY);
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    for (const bare of ['1234', Buffer.from('1234').toString('base64'), '{"PIN":"MTIzNA=="}']) {
      const sha = createHash('sha256').update(bare).digest('hex');
      expect(sha.startsWith(a)).toBe(false);
    }
    expect(value(KEY)).toBe(a);
    expect(value(Buffer.alloc(32, 1))).not.toBe(a);
  });

  it('treats stringData as the base64 data it becomes', () => {
    const stream = (secret: string) =>
      `apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n${secret}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec: {template: {spec: {containers: [{name: c, envFrom: [{secretRef: {name: s}}]}]}}}\n`;
    const hash = (s: string) =>
      injectChecksums([{ name: '-', text: stream(s) }], KEY, { annotation: ANN }).workloads[0]?.hash;
    expect(hash('stringData: {a: x}')).toBe(hash(`data: {a: ${Buffer.from('x').toString('base64')}}`));
    expect(hash('stringData: {a: x}')).not.toBe(hash('stringData: {a: y}'));
  });
});

describe('gitops-reloader checksum', () => {
  it('prints the stream with checksums for -', async () => {
    const c = capture();
    const code = await checksum(['-', '--key-file', keyFile], {}, c.write, c.io(STREAM));
    expect(code).toBe(0);
    expect(parseAllDocuments(c.out.join(''))[2]?.toJS().spec.template.metadata.annotations[ANN]).toMatch(
      /^[0-9a-f]{32}$/,
    );
  });

  it('--check fails on stale input and passes after --in-place, which touches only files that change', async () => {
    await mkdir(path.join(dir, 'app', 'templates'), { recursive: true });
    await writeFile(path.join(dir, 'app', 'all.yaml'), STREAM);
    const readme = `apiVersion: v1\nkind: Service\nmetadata: {name: web}   # untouched\n`;
    await writeFile(path.join(dir, 'app', 'svc.yaml'), readme);
    await writeFile(
      path.join(dir, 'app', 'templates', 'helm.yaml'),
      'metadata:\n  name: {{ .Release.Name }\n',
    );
    const before = await stat(path.join(dir, 'app', 'svc.yaml'));
    const env = { GITOPS_RELOADER_KEY_FILE: keyFile };
    const app = path.join(dir, 'app');

    const c1 = capture();
    expect(await checksum([app, '--check'], env, c1.write, c1.io())).toBe(1);
    expect(c1.err.join('')).toContain('missing: Deployment shop/web in all.yaml');
    expect(c1.err.join('')).toContain('skipped templates/helm.yaml');

    const c2 = capture();
    expect(await checksum([app, '--in-place'], env, c2.write, c2.io())).toBe(0);
    expect(c2.err.join('')).toContain('1 file(s) updated');
    expect((await stat(path.join(dir, 'app', 'svc.yaml'))).mtimeMs).toBe(before.mtimeMs);

    const c3 = capture();
    expect(await checksum([app, '--check'], env, c3.write, c3.io())).toBe(0);

    // A config changes: the annotation is now stale.
    const all = await readFile(path.join(app, 'all.yaml'), 'utf8');
    await writeFile(path.join(app, 'all.yaml'), all.replace('LOG_LEVEL: info', 'LOG_LEVEL: debug'));
    const c4 = capture();
    expect(await checksum([app, '--check'], env, c4.write, c4.io())).toBe(1);
    expect(c4.err.join('')).toContain('stale: Deployment shop/web');
  });

  it('prints a directory as one stream of its manifests, each file byte for byte', async () => {
    await writeFile(
      path.join(dir, 'a.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}',
    );
    await writeFile(path.join(dir, 'kustomization.yaml'), 'resources: [a.yaml]\n');
    const c = capture();
    expect(await checksum([dir, '--key-file', keyFile], {}, c.write, c.io())).toBe(0);
    expect(c.out.join('')).toBe('apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n');
  });

  it('refuses bad usage with exit 2 and a short key with exit 1', async () => {
    const c = capture();
    expect(await checksum(['-', '--in-place', '--key-file', keyFile], {}, c.write, c.io())).toBe(2);
    expect(await checksum(['-'], {}, c.write, c.io())).toBe(2);
    expect(await checksum(['--check', '--in-place', '--key-file', keyFile], {}, c.write, c.io())).toBe(2);
    await writeFile(keyFile, 'short\n');
    expect(await checksum(['-', '--key-file', keyFile], {}, c.write, c.io(STREAM))).toBe(1);
    expect(c.err.join('')).toContain('at least 32');
  });
});
