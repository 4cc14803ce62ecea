// Finds, in a checkout, the file to edit so that a workload's pod template gets an annotation: a
// manifest in a plain directory, a Kustomize resource or patch, or a Helm values file. Reads only;
// never follows a symlink or a path out of the checkout.
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Document } from 'yaml';
import { hasURLScheme } from '../service/core/repo-url.ts';
import {
  defaultApiVersion,
  documentMatches,
  parseStream,
  parseValuesPath,
  podTemplateAnnotationPath,
  type WorkloadSelector,
} from './manifest-edit.ts';

export interface LocateTarget extends WorkloadSelector {
  /** The annotation key that will be set (to prefer a Kustomize patch that already sets it). */
  annotationKey: string;
  /** Helm: the values map that holds pod annotations, e.g. `podAnnotations` (gitops-reloader.io/git-values-path). */
  valuesPath?: string;
  /** Helm: the values file, relative to the app path. Default values.yaml. */
  valuesFile?: string;
}

export type SourceType = 'directory' | 'kustomize' | 'helm';

/** Every `file` is relative to the checkout root, with forward slashes. */
export type WorkloadLocation =
  | {
      type: 'manifest';
      file: string;
      /** The workload as this file names it (before a Kustomize namePrefix/nameSuffix). */
      select: WorkloadSelector;
      source: 'directory' | 'kustomize-resource' | 'kustomize-patch';
    }
  | {
      /** Create `patchFile` and list it in `kustomization` (or edit it when it exists). */
      type: 'kustomize-new-patch';
      kustomization: string;
      patchFile: string;
      select: WorkloadSelector;
      apiVersion: string;
    }
  | { type: 'helm-values'; file: string; valuesPath: string[] };

export class LocateError extends Error {
  override name = 'LocateError';
  readonly reason: 'not-found' | 'ambiguous' | 'invalid';
  constructor(message: string, reason: LocateError['reason']) {
    super(message);
    this.reason = reason;
  }
}

export const KUSTOMIZATION_FILES = ['kustomization.yaml', 'kustomization.yml', 'Kustomization'];
const MAX_FILE_BYTES = 4 * 1024 * 1024;

/** What kind of source lives at `appPath`, as Argo CD would decide it. */
export async function detectSource(root: string, appPath: string): Promise<SourceType> {
  const dir = inside(root, appPath);
  if (await isFile(path.join(dir, 'Chart.yaml'))) return 'helm';
  if (await kustomizationIn(dir)) return 'kustomize';
  return 'directory';
}

export async function locateWorkload(
  root: string,
  appPath: string,
  target: LocateTarget,
): Promise<WorkloadLocation> {
  const dir = inside(root, appPath);
  if (!(await isDir(dir)))
    throw new LocateError(`path ${show(appPath)} is not a directory in the repository`, 'invalid');
  const source = await detectSource(root, appPath);
  if (target.valuesPath !== undefined && source !== 'helm') {
    throw new LocateError(
      `a values path (${target.valuesPath}) is set for ${describe(target)}, but ${show(appPath)} is not a Helm chart (no Chart.yaml)`,
      'invalid',
    );
  }
  switch (source) {
    case 'helm':
      return helm(root, dir, target);
    case 'kustomize':
      return kustomize(root, dir, target);
    case 'directory':
      return directory(root, dir, target);
  }
}

// --- Helm -------------------------------------------------------------------------------------

function helm(root: string, dir: string, target: LocateTarget): WorkloadLocation {
  let valuesPath: string[];
  try {
    valuesPath = parseValuesPath(target.valuesPath ?? 'podAnnotations');
  } catch (err) {
    throw new LocateError((err as Error).message, 'invalid');
  }
  const file = inside(root, path.join(rel(root, dir), target.valuesFile ?? 'values.yaml'));
  return { type: 'helm-values', file: rel(root, file), valuesPath: [...valuesPath, target.annotationKey] };
}

// --- plain directory ----------------------------------------------------------------------------

async function directory(root: string, dir: string, target: LocateTarget): Promise<WorkloadLocation> {
  const unreadable: string[] = [];
  const found: Array<{ file: string; exactNamespace: boolean }> = [];
  for (const file of await listYamlFiles(dir)) {
    const docs = await readDocs(file, unreadable, root);
    for (const js of docs) {
      if (!documentMatches(js, target)) continue;
      const ns = (js as { metadata?: { namespace?: unknown } }).metadata?.namespace;
      found.push({ file: rel(root, file), exactNamespace: ns !== undefined && ns === target.namespace });
    }
  }
  const file = pickOne(found, target, unreadable);
  return { type: 'manifest', file, select: strip(target), source: 'directory' };
}

function pickOne(
  found: Array<{ file: string; exactNamespace: boolean }>,
  target: LocateTarget,
  unreadable: string[],
): string {
  const exact = found.filter((f) => f.exactNamespace);
  const pool = exact.length > 0 ? exact : found;
  const files = [...new Set(pool.map((f) => f.file))];
  if (files.length === 1) return files[0] as string;
  if (files.length > 1) {
    throw new LocateError(
      `${describe(target)} is defined in several files: ${files.join(', ')}`,
      'ambiguous',
    );
  }
  const note =
    unreadable.length > 0 ? ` (not valid YAML, skipped: ${unreadable.slice(0, 5).join(', ')})` : '';
  throw new LocateError(`${describe(target)} is not defined in any manifest${note}`, 'not-found');
}

/** Every .yaml/.yml file under `dir`, sorted, skipping dot-directories and symlinks. */
export async function listYamlFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    if (e.name.startsWith('.')) continue;
    const full = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await listYamlFiles(full)));
    else if (e.isFile() && /\.ya?ml$/i.test(e.name)) out.push(full);
  }
  return out;
}

// --- Kustomize ----------------------------------------------------------------------------------

interface Found {
  file: string;
  select: WorkloadSelector;
  apiVersion: string;
}

interface Scan {
  /** Resource documents that are the workload. */
  resources: Found[];
  /** Strategic-merge patch documents for the workload, in the order Kustomize applies them. */
  patches: Array<Found & { setsKey: boolean; kustomization: string }>;
  /** Resources that cannot be read here: remote bases, or paths outside the checkout. */
  unresolved: string[];
  unreadable: string[];
}

async function kustomize(root: string, dir: string, target: LocateTarget): Promise<WorkloadLocation> {
  const scan: Scan = { resources: [], patches: [], unresolved: [], unreadable: [] };
  const top = await scanKustomization(root, dir, target, target.name, false, scan, new Set());
  const appRel = rel(root, dir);
  const underApp = (file: string) => appRel === '' || file === appRel || file.startsWith(`${appRel}/`);
  const withKey = scan.patches.filter((p) => p.setsKey && underApp(p.file));
  const last = withKey.at(-1);
  // A patch that already sets the annotation wins over the resource (it is applied later).
  if (last) return { type: 'manifest', file: last.file, select: last.select, source: 'kustomize-patch' };
  const own = scan.resources.filter((r) => underApp(r.file));
  const files = [...new Set(own.map((r) => r.file))];
  if (files.length > 1) {
    throw new LocateError(
      `${describe(target)} is defined in several files: ${files.join(', ')}`,
      'ambiguous',
    );
  }
  const resource = own[0];
  if (resource)
    return { type: 'manifest', file: resource.file, select: resource.select, source: 'kustomize-resource' };
  // The workload comes from a remote base or one shared with other paths (overlays): patch it here,
  // so that only this application's pods roll.
  const outside = scan.resources[0];
  if (!outside && scan.unresolved.length === 0) {
    const note =
      scan.unreadable.length > 0
        ? ` (not valid YAML, skipped: ${scan.unreadable.slice(0, 5).join(', ')})`
        : '';
    throw new LocateError(
      `${describe(target)} is not defined by the kustomization in ${show(appRel)}${note}`,
      'not-found',
    );
  }
  const select: WorkloadSelector = { kind: target.kind, name: top.innerName };
  const existing = scan.patches.filter((p) => p.kustomization === top.file && underApp(p.file)).at(-1);
  if (existing)
    return { type: 'manifest', file: existing.file, select: existing.select, source: 'kustomize-patch' };
  const patchFile = path.posix.join(
    appRel,
    `gitops-reloader-${target.kind.toLowerCase()}-${top.innerName}.yaml`,
  );
  return {
    type: 'kustomize-new-patch',
    kustomization: top.file,
    patchFile,
    select,
    apiVersion: outside?.apiVersion ?? defaultApiVersion(target.kind),
  };
}

interface KustomizationFile {
  resources?: unknown;
  bases?: unknown;
  components?: unknown;
  patches?: unknown;
  patchesStrategicMerge?: unknown;
  namePrefix?: unknown;
  nameSuffix?: unknown;
  namespace?: unknown;
}

async function scanKustomization(
  root: string,
  dir: string,
  target: LocateTarget,
  name: string,
  namespaceSet: boolean,
  scan: Scan,
  seen: Set<string>,
): Promise<{ file: string; innerName: string }> {
  const kfile = await kustomizationIn(dir);
  if (!kfile) throw new LocateError(`${show(rel(root, dir))} has no kustomization.yaml`, 'invalid');
  const file = rel(root, kfile);
  const k = ((await readDocs(kfile, scan.unreadable, root))[0] ?? {}) as KustomizationFile;
  const prefix = typeof k.namePrefix === 'string' ? k.namePrefix : '';
  const suffix = typeof k.nameSuffix === 'string' ? k.nameSuffix : '';
  // The name this kustomization's inputs give the workload, before its own prefix and suffix.
  const fits =
    name.startsWith(prefix) && name.endsWith(suffix) && name.length >= prefix.length + suffix.length;
  const inner = fits ? name.slice(prefix.length, name.length - suffix.length) : name;
  if (seen.has(dir)) return { file, innerName: inner };
  seen.add(dir);
  const ns = typeof k.namespace === 'string' && k.namespace !== '' ? k.namespace : undefined;
  const nsOk = ns === undefined || target.namespace === undefined || ns === target.namespace;
  const fixed = namespaceSet || ns !== undefined;
  const select = (n: string): WorkloadSelector => ({
    kind: target.kind,
    name: n,
    ...(fixed || target.namespace === undefined
      ? {}
      : { namespace: target.namespace, ...(target.namespaceRequired ? { namespaceRequired: true } : {}) }),
  });

  if (fits && nsOk) {
    for (const entry of [...strings(k.resources), ...strings(k.bases), ...strings(k.components)]) {
      const resolved = await resolveLocal(root, dir, entry);
      if (resolved === undefined) {
        scan.unresolved.push(entry);
      } else if (await isDir(resolved)) {
        if (await kustomizationIn(resolved)) {
          await scanKustomization(root, resolved, target, inner, fixed, scan, seen);
        } else {
          scan.unresolved.push(entry);
        }
      } else {
        for (const [js] of await docsMatching(resolved, select(inner), scan, root)) {
          scan.resources.push({
            file: rel(root, resolved),
            select: select(inner),
            apiVersion: apiVersionOf(js, target),
          });
        }
      }
    }
  }

  // Patches name the workload before this level's prefix; accept the full name too.
  const patchFiles: string[] = [];
  for (const p of Array.isArray(k.patches) ? k.patches : []) {
    if (p && typeof p === 'object' && typeof (p as { path?: unknown }).path === 'string') {
      patchFiles.push((p as { path: string }).path);
    }
  }
  for (const p of strings(k.patchesStrategicMerge)) if (!p.includes('\n')) patchFiles.push(p);
  for (const p of patchFiles) {
    const resolved = await resolveLocal(root, dir, p);
    if (resolved === undefined || (await isDir(resolved))) continue;
    for (const n of new Set([inner, name])) {
      for (const [js] of await docsMatching(resolved, { kind: target.kind, name: n }, scan, root)) {
        scan.patches.push({
          file: rel(root, resolved),
          select: { kind: target.kind, name: n },
          apiVersion: apiVersionOf(js, target),
          setsKey: hasPath(js, podTemplateAnnotationPath(target.kind, target.annotationKey)),
          kustomization: file,
        });
      }
    }
  }
  return { file, innerName: inner };
}

async function docsMatching(
  file: string,
  sel: WorkloadSelector,
  scan: Scan,
  root: string,
): Promise<Array<[unknown]>> {
  return (await readDocs(file, scan.unreadable, root))
    .filter((js) => documentMatches(js, sel))
    .map((js) => [js]);
}

function apiVersionOf(js: unknown, target: WorkloadSelector): string {
  const v = (js as { apiVersion?: unknown }).apiVersion;
  return typeof v === 'string' ? v : defaultApiVersion(target.kind);
}

function hasPath(js: unknown, p: readonly string[]): boolean {
  let cur = js;
  for (const seg of p) {
    if (typeof cur !== 'object' || cur === null || !Object.hasOwn(cur, seg)) return false;
    cur = (cur as Record<string, unknown>)[seg];
  }
  return true;
}

const strings = (v: unknown): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && x !== '') : [];

/** A kustomization entry as a path in the checkout, or undefined for a URL or anything outside it. */
async function resolveLocal(root: string, dir: string, entry: string): Promise<string | undefined> {
  if (hasURLScheme(entry) || entry.startsWith('git@') || entry.includes('?')) return undefined;
  const full = path.resolve(dir, entry);
  const r = path.relative(root, full);
  if (r.startsWith('..') || path.isAbsolute(r)) return undefined;
  try {
    const st = await lstat(full);
    return st.isSymbolicLink() ? undefined : full;
  } catch {
    return undefined; // not a local path, e.g. github.com/org/repo//dir
  }
}

async function kustomizationIn(dir: string): Promise<string | undefined> {
  for (const n of KUSTOMIZATION_FILES) {
    const f = path.join(dir, n);
    if (await isFile(f)) return f;
  }
  return undefined;
}

// --- files --------------------------------------------------------------------------------------

/** The documents of a YAML file as plain JS; a file that does not parse is noted and yields none. */
async function readDocs(file: string, unreadable: string[], root: string): Promise<unknown[]> {
  try {
    const st = await lstat(file);
    if (!st.isFile() || st.size > MAX_FILE_BYTES) return [];
    const text = await readFile(file, 'utf8');
    return parseStream(text).map((d: Document.Parsed) => d.toJS());
  } catch {
    unreadable.push(rel(root, file));
    return [];
  }
}

/** `p` (relative to root) as an absolute path, refusing anything that leaves the checkout. */
function inside(root: string, p: string): string {
  const full = path.resolve(root, p);
  const r = path.relative(root, full);
  if (r.startsWith('..') || path.isAbsolute(r)) {
    throw new LocateError(`path ${show(p)} leaves the repository`, 'invalid');
  }
  return full;
}

function rel(root: string, full: string): string {
  return path.relative(root, full).split(path.sep).join('/');
}

async function isFile(p: string): Promise<boolean> {
  try {
    return (await lstat(p)).isFile();
  } catch {
    return false;
  }
}

async function isDir(p: string): Promise<boolean> {
  try {
    return (await lstat(p)).isDirectory();
  } catch {
    return false;
  }
}

const show = (p: string) => JSON.stringify(p === '' ? '.' : p);

const strip = (t: LocateTarget): WorkloadSelector => ({
  kind: t.kind,
  name: t.name,
  ...(t.namespace === undefined ? {} : { namespace: t.namespace }),
  ...(t.namespaceRequired ? { namespaceRequired: true } : {}),
});

function describe(t: WorkloadSelector): string {
  return `${t.kind} ${t.namespace ? `${t.namespace}/` : ''}${t.name}`;
}
