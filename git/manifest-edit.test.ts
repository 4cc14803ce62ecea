import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import {
  addKustomizePatch,
  ManifestEditError,
  parseValuesPath,
  setPaths,
  setPodTemplateAnnotation,
  setValuesKey,
  strategicMergePatch,
} from './manifest-edit.ts';

const KEY = 'gitops-reloader.io/config-hash';

/** The lines that differ between two texts, assuming one contiguous change (what every edit makes). */
function diff(before: string, after: string): { removed: string[]; added: string[] } {
  const a = before.split('\n');
  const b = after.split('\n');
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  )
    tail++;
  return { removed: a.slice(head, a.length - tail), added: b.slice(head, b.length - tail) };
}

const DEPLOYMENT = `# The web front end. Keep replicas in step with the HPA.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web   # referenced by the Service
  namespace: shop
  labels: {app: web, tier: "front"}
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
      annotations:
        prometheus.io/scrape: 'true'   # scraped by the shared Prometheus
    spec:
      # Containers keep their order: the sidecar must start second.
      containers:
        - name: web
          image: "ghcr.io/acme/web:1.4.2"
          envFrom:
            - configMapRef: {name: web-config}
          args: ["--port", '8080']
        - name: proxy
          image: envoy:v1
`;

describe('setPodTemplateAnnotation', () => {
  it('adds the annotation as one new line and keeps comments, key order and quoting', () => {
    const r = setPodTemplateAnnotation(DEPLOYMENT, { kind: 'Deployment', name: 'web' }, KEY, 'abc123');
    expect(r.changed).toBe(true);
    expect(diff(DEPLOYMENT, r.text)).toEqual({ removed: [], added: [`        ${KEY}: "abc123"`] });
    expect(parse(r.text).spec.template.metadata.annotations).toEqual({
      'prometheus.io/scrape': 'true',
      [KEY]: 'abc123',
    });
  });

  it('replaces an existing value in place, in the quoting style it had', () => {
    const once = setPodTemplateAnnotation(DEPLOYMENT, { kind: 'Deployment', name: 'web' }, KEY, 'aaa').text;
    const twice = setPodTemplateAnnotation(once, { kind: 'Deployment', name: 'web' }, KEY, 'bbb');
    expect(diff(once, twice.text)).toEqual({
      removed: [`        ${KEY}: "aaa"`],
      added: [`        ${KEY}: "bbb"`],
    });
    const single = `kind: Deployment\nmetadata: {name: w}\nspec:\n  template:\n    metadata:\n      annotations:\n        ${KEY}: 'old' # c\n`;
    expect(setPodTemplateAnnotation(single, { kind: 'Deployment', name: 'w' }, KEY, 'new').text).toBe(
      single.replace(`'old'`, `'new'`),
    );
    const plain = single.replace(`'old'`, 'old');
    expect(setPodTemplateAnnotation(plain, { kind: 'Deployment', name: 'w' }, KEY, 'f00d').text).toBe(
      plain.replace('old', 'f00d'),
    );
    // Plain digits would read back as a number, so they are quoted.
    expect(setPodTemplateAnnotation(plain, { kind: 'Deployment', name: 'w' }, KEY, '1234').text).toBe(
      plain.replace('old', '"1234"'),
    );
  });

  it('fills an annotation key that has no value, keeping its comment', () => {
    const src = `kind: Deployment\nmetadata: {name: w}\nspec:\n  template:\n    metadata:\n      annotations:\n        ${KEY}: # set by gitops-reloader\n        other: x\n`;
    const r = setPodTemplateAnnotation(src, { kind: 'Deployment', name: 'w' }, KEY, 'v');
    expect(diff(src, r.text)).toEqual({
      removed: [`        ${KEY}: # set by gitops-reloader`],
      added: [`        ${KEY}: "v" # set by gitops-reloader`],
    });
  });

  it('returns the same text when the value is already set', () => {
    const once = setPodTemplateAnnotation(DEPLOYMENT, { kind: 'Deployment', name: 'web' }, KEY, 'abc').text;
    const again = setPodTemplateAnnotation(once, { kind: 'Deployment', name: 'web' }, KEY, 'abc');
    expect(again).toEqual({ text: once, changed: false, matched: 1 });
  });

  it('creates metadata and annotations when the template has neither', () => {
    const src = `apiVersion: apps/v1
kind: StatefulSet
metadata:
    name: db
spec:
    template:
        spec:
            containers: [{name: db, image: postgres}]
`;
    const r = setPodTemplateAnnotation(src, { kind: 'StatefulSet', name: 'db' }, 'checksum/config', 'x1');
    // Four-space indentation, as the file uses.
    expect(diff(src, r.text).added).toEqual([
      '        metadata:',
      '            annotations:',
      '                checksum/config: "x1"',
    ]);
    expect(parse(r.text).spec.template.metadata.annotations).toEqual({ 'checksum/config': 'x1' });
  });

  it('turns an empty flow map into a block map and keeps a null annotations key readable', () => {
    const flow = `kind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  template:\n    metadata:\n      annotations: {}\n    spec: {}\n`;
    const r = setPodTemplateAnnotation(flow, { kind: 'DaemonSet', name: 'agent' }, KEY, 'v');
    expect(diff(flow, r.text)).toEqual({
      removed: ['      annotations: {}'],
      added: ['      annotations:', `        ${KEY}: "v"`],
    });
    const nul = flow.replace('annotations: {}', 'annotations:');
    const r2 = setPodTemplateAnnotation(nul, { kind: 'DaemonSet', name: 'agent' }, KEY, 'v');
    expect(diff(nul, r2.text)).toEqual({ removed: [], added: [`        ${KEY}: "v"`] });
    const inline = flow.replace('annotations: {}', 'annotations: {a: b}');
    const r3 = setPodTemplateAnnotation(inline, { kind: 'DaemonSet', name: 'agent' }, KEY, 'v');
    expect(diff(inline, r3.text).added).toEqual([`      annotations: {a: b, ${KEY}: "v"}`]);
  });

  it('edits the CronJob job template and only the named document of a stream', () => {
    const src = `---
# first
apiVersion: v1
kind: ConfigMap
metadata: {name: web}
data: {a: "1"}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: web
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox}]
---
kind: Deployment
metadata:
  name: web
  namespace: other
spec: {template: {spec: {}}}
`;
    const r = setPodTemplateAnnotation(src, { kind: 'CronJob', name: 'web', namespace: 'shop' }, KEY, 'h');
    expect(r.matched).toBe(1);
    expect(diff(src, r.text).added).toEqual([
      '        metadata:',
      '          annotations:',
      `            ${KEY}: "h"`,
    ]);
    const docs = parseAllDocuments(r.text).map((d) => d.toJS());
    expect(docs[1].spec.jobTemplate.spec.template.metadata.annotations[KEY]).toBe('h');
    expect(docs[2].spec.template.metadata).toBeUndefined();
    // The Deployment in namespace `other` is not the one in `shop`.
    const miss = setPodTemplateAnnotation(
      src,
      { kind: 'Deployment', name: 'web', namespace: 'shop' },
      KEY,
      'h',
    );
    expect(miss).toEqual({ text: src, changed: false, matched: 0 });
  });

  it('keeps CRLF line endings and a missing final newline', () => {
    const src =
      'kind: Deployment\r\nmetadata:\r\n  name: w\r\nspec:\r\n  template:\r\n    metadata:\r\n      labels: {a: b}';
    const r = setPodTemplateAnnotation(src, { kind: 'Deployment', name: 'w' }, KEY, 'v');
    expect(r.text).toBe(`${src}\r\n      annotations:\r\n        ${KEY}: "v"`);
  });

  it('refuses a YAML alias instead of changing every place that uses it', () => {
    const src = `kind: Deployment\nmetadata: {name: w}\nx: &ann {a: b}\nspec:\n  template:\n    metadata:\n      annotations: *ann\n`;
    expect(() => setPodTemplateAnnotation(src, { kind: 'Deployment', name: 'w' }, KEY, 'v')).toThrow(
      ManifestEditError,
    );
  });

  it('names a syntax error instead of guessing', () => {
    expect(() => setPodTemplateAnnotation('a: [b\n', { kind: 'Deployment', name: 'w' }, KEY, 'v')).toThrow(
      /not valid YAML/,
    );
  });
});

describe('setValuesKey (Helm)', () => {
  const VALUES = `# Default values for web.
replicaCount: 1

image:
  repository: ghcr.io/acme/web
  tag: "1.4.2"   # bumped by CI

podAnnotations: {}

resources: {}
`;

  it('fills an empty podAnnotations map', () => {
    const r = setValuesKey(VALUES, ['podAnnotations', KEY], 'abc');
    expect(diff(VALUES, r.text)).toEqual({
      removed: ['podAnnotations: {}'],
      added: ['podAnnotations:', `  ${KEY}: "abc"`],
    });
    expect(setValuesKey(r.text, ['podAnnotations', KEY], 'abc').changed).toBe(false);
    const next = setValuesKey(r.text, ['podAnnotations', KEY], 'def');
    expect(diff(r.text, next.text)).toEqual({ removed: [`  ${KEY}: "abc"`], added: [`  ${KEY}: "def"`] });
  });

  it('creates a nested values path at the end of the file, and works on an empty file', () => {
    const r = setValuesKey(VALUES, parseValuesPath('worker.podAnnotations').concat('checksum/config'), 'x');
    expect(r.text).toBe(`${VALUES}worker:\n  podAnnotations:\n    checksum/config: "x"\n`);
    expect(setValuesKey('', ['podAnnotations', KEY], 'x').text).toBe(`podAnnotations:\n  ${KEY}: "x"\n`);
    expect(setValuesKey('# nothing yet\n', ['podAnnotations', KEY], 'x').text).toBe(
      `# nothing yet\npodAnnotations:\n  ${KEY}: "x"\n`,
    );
  });

  it('rejects a values path that runs into a list or a string', () => {
    expect(() => setValuesKey(VALUES, ['image', 'tag', KEY], 'x')).toThrow(/image.tag is a string/);
    expect(() => parseValuesPath('a..b')).toThrow(ManifestEditError);
  });
});

describe('Kustomize patches', () => {
  it('appends to an existing patches list in its own indentation', () => {
    const src = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - https://github.com/acme/base//deploy?ref=v1
patches:
  - path: replicas.yaml   # prod size
namespace: shop
`;
    const r = addKustomizePatch(src, { path: 'p.yaml', target: { kind: 'Deployment', name: 'web' } });
    expect(diff(src, r.text)).toEqual({
      removed: [],
      added: ['  - path: p.yaml', '    target:', '      kind: Deployment', '      name: web'],
    });
    expect(
      addKustomizePatch(r.text, { path: 'p.yaml', target: { kind: 'Deployment', name: 'web' } }).changed,
    ).toBe(false);
  });

  it('creates the list when there is none, like the other root lists', () => {
    const src = `resources:\n- github.com/acme/base?ref=v1\n`;
    const r = addKustomizePatch(src, { path: 'p.yaml', target: { kind: 'CronJob', name: 'c' } });
    expect(r.text).toBe(`${src}patches:\n- path: p.yaml\n  target:\n    kind: CronJob\n    name: c\n`);
    expect(
      parse(addKustomizePatch('patches: []\n', { path: 'p.yaml', target: { kind: 'A', name: 'b' } }).text),
    ).toEqual({
      patches: [{ path: 'p.yaml', target: { kind: 'A', name: 'b' } }],
    });
  });

  it('fills a patches key that is there but empty', () => {
    const src = 'resources:\n  - a.yaml\npatches:   # none yet\nnamespace: x\n';
    expect(addKustomizePatch(src, { path: 'p.yaml', target: { kind: 'A', name: 'b' } }).text).toBe(
      'resources:\n  - a.yaml\npatches:   # none yet\n  - path: p.yaml\n    target:\n      kind: A\n      name: b\nnamespace: x\n',
    );
  });

  it('writes a strategic-merge patch that sets only the annotation', () => {
    const text = strategicMergePatch({ kind: 'CronJob', name: 'c' }, 'batch/v1', KEY, '0123');
    expect(parse(text)).toEqual({
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: { name: 'c' },
      spec: { jobTemplate: { spec: { template: { metadata: { annotations: { [KEY]: '0123' } } } } } },
    });
  });
});

describe('setPaths', () => {
  it('sets several values in one pass, each as its own line', () => {
    const src = `a:\n  x: 1\n---\nb:\n  y: 2\n`;
    const r = setPaths(src, [
      { doc: 0, path: ['a', 'k'], value: 'v0' },
      { doc: 1, path: ['b', 'k'], value: 'v1' },
    ]);
    expect(r.text).toBe(`a:\n  x: 1\n  k: "v0"\n---\nb:\n  y: 2\n  k: "v1"\n`);
  });
});
