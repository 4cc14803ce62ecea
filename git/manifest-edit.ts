// Sets one string value deep inside YAML text (a pod-template annotation, a Helm values key, a
// Kustomize patch entry) so that the diff is only the line(s) that carry it. The yaml Document API
// finds where the value lives; the text is then spliced at those offsets instead of re-stringified,
// because re-stringifying re-flows comments, blank lines, indentation and quoting (ADR 0006).
// Every edit is checked by parsing the result: it must equal the original with only that value set.
import { isDeepStrictEqual } from 'node:util';
import {
  type Document,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  parseAllDocuments,
  parseDocument,
  Scalar,
  stringify,
  type YAMLMap,
  type YAMLSeq,
} from 'yaml';
import type { WorkloadKind } from '../service/core/types.ts';

/** A workload as a manifest names it. A selector without namespace matches a document in any namespace. */
export interface WorkloadSelector {
  kind: string;
  name: string;
  namespace?: string;
  /**
   * The document must name `namespace` itself: nothing else gives it one (a Flux Kustomization
   * without targetNamespace, no Kustomize namespace above it). Without it, a document that names no
   * namespace matches too.
   */
  namespaceRequired?: boolean;
}

export interface EditResult {
  /** The new text; the same string as the input when nothing had to change. */
  text: string;
  changed: boolean;
  /** Documents (or locations) the edit applied to, changed or already up to date. */
  matched: number;
}

/** A value could not be set without rewriting more than that value (or the input is not YAML). */
export class ManifestEditError extends Error {
  override name = 'ManifestEditError';
}

/** Where a kind keeps its pod template. */
export function podTemplatePath(kind: string): string[] {
  return kind === 'CronJob' ? ['spec', 'jobTemplate', 'spec', 'template'] : ['spec', 'template'];
}

export function podTemplateAnnotationPath(kind: string, key: string): string[] {
  return [...podTemplatePath(kind), 'metadata', 'annotations', key];
}

const API_VERSIONS: Record<WorkloadKind, string> = {
  Deployment: 'apps/v1',
  StatefulSet: 'apps/v1',
  DaemonSet: 'apps/v1',
  CronJob: 'batch/v1',
  Job: 'batch/v1',
  Rollout: 'argoproj.io/v1alpha1',
};

export function defaultApiVersion(kind: string): string {
  return API_VERSIONS[kind as WorkloadKind] ?? 'apps/v1';
}

/** Whether a parsed manifest document is the workload `sel`. */
export function documentMatches(doc: unknown, sel: WorkloadSelector): boolean {
  if (typeof doc !== 'object' || doc === null) return false;
  const d = doc as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } | null };
  if (d.kind !== sel.kind || d.metadata?.name !== sel.name) return false;
  const ns = d.metadata?.namespace;
  if (sel.namespace === undefined || ns === sel.namespace) return true;
  // A manifest without a namespace gets one from Argo CD's destination or Kustomize: it can be
  // anywhere, unless nothing gives it one (then it is not this workload's).
  return !sel.namespaceRequired && (ns === undefined || ns === null || ns === '');
}

/**
 * Sets `key` = `value` in the pod-template annotations of every document of `text` that is `workload`
 * (for a CronJob, spec.jobTemplate.spec.template). Creates annotations/metadata maps when missing.
 */
export function setPodTemplateAnnotation(
  text: string,
  workload: WorkloadSelector,
  key: string,
  value: string,
): EditResult {
  const docs = parseStream(text);
  const sets = docs.flatMap((d, i) =>
    documentMatches(d.toJS(), workload)
      ? [{ doc: i, path: podTemplateAnnotationPath(workload.kind, key), value }]
      : [],
  );
  if (sets.length === 0) return { text, changed: false, matched: 0 };
  return setPaths(text, sets);
}

export interface PathSet {
  /** Index of the document in the stream (0 for a single-document file). */
  doc: number;
  /** Map keys from the document root; missing maps are created. */
  path: readonly string[];
  value: string;
}

/** Sets string values at map paths in any documents of a stream, touching only those values' lines. */
export function setPaths(text: string, sets: readonly PathSet[]): EditResult {
  const docs = parseStream(text);
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const splices: Splice[] = [];
  for (const s of sets) {
    if (s.path.length === 0) throw new ManifestEditError('an empty path names no value');
    const doc = docs[s.doc];
    if (doc === undefined && !(s.doc === 0 && docs.length === 0)) {
      throw new ManifestEditError(`document ${s.doc} does not exist`);
    }
    splices.push(...planSet(text, doc, s.path, s.value, eol));
  }
  if (splices.length === 0) return { text, changed: false, matched: sets.length };
  const out = applySplices(text, splices);
  verify(text, out, (js) => {
    for (const s of sets) js[s.doc] = setDeep(js[s.doc], s.path, s.value);
  });
  return { text: out, changed: out !== text, matched: sets.length };
}

/** Sets a Helm values key, e.g. path ['podAnnotations', 'checksum/config']. An empty file is fine. */
export function setValuesKey(text: string, path: readonly string[], value: string): EditResult {
  return setPaths(text, [{ doc: 0, path, value }]);
}

/** `a.b.c` → ['a','b','c']; what gitops-reloader.io/git-values-path holds. */
export function parseValuesPath(raw: string): string[] {
  const parts = raw.split('.').map((p) => p.trim());
  if (raw.trim() === '' || parts.some((p) => p === '')) {
    throw new ManifestEditError(`values path ${JSON.stringify(raw)} is not of the form key or key.key`);
  }
  return parts;
}

export interface KustomizePatchEntry {
  path: string;
  target: { kind: string; name: string };
}

/**
 * Lists a patch file under `patches:` in a kustomization.yaml (appending to the list, or creating it).
 * Unchanged when an entry with the same path is there already.
 */
export function addKustomizePatch(text: string, entry: KustomizePatchEntry): EditResult {
  const docs = parseStream(text);
  const doc = docs[0];
  const root = doc?.contents;
  if (root !== undefined && root !== null && !isMap(root)) {
    throw new ManifestEditError('kustomization is not a map');
  }
  const item = { path: entry.path, target: { kind: entry.target.kind, name: entry.target.name } };
  const existing = root ? root.items.find((p) => keyIs(p.key, 'patches')) : undefined;
  const patches = existing?.value;
  if (isSeq(patches)) {
    const listed = patches.items.some((i) => {
      const js = isMap(i) ? i.toJSON() : isScalar(i) ? i.value : undefined;
      return js === entry.path || (typeof js === 'object' && js !== null && js.path === entry.path);
    });
    if (listed) return { text, changed: false, matched: 1 };
  } else if (patches !== undefined && patches !== null && !(isScalar(patches) && patches.value === null)) {
    throw new ManifestEditError('kustomization field patches is not a list');
  }
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const splices: Splice[] = [];
  if (isSeq(patches)) {
    splices.push(appendToSeq(text, patches, existing, item, eol));
  } else {
    // No list yet: a new root key, its items indented like the file's other root lists.
    const seqCol = root ? rootSeqIndent(text, root) : 0;
    const lines = [`patches:`, ...blockItemLines(item, seqCol)];
    if (existing) {
      splices.push(...replaceNullWithLines(text, existing, lines.slice(1), eol));
    } else {
      splices.push(insertLines(text, root ? root.range[1] : text.length, lines, eol));
    }
  }
  const out = applySplices(text, splices);
  verify(text, out, (js) => {
    const d = (js[0] ?? {}) as Record<string, unknown>;
    const list = Array.isArray(d.patches) ? d.patches : [];
    js[0] = { ...d, patches: [...list, item] };
  });
  return { text: out, changed: true, matched: 1 };
}

/** A new strategic-merge patch file that sets one pod-template annotation of a workload. */
export function strategicMergePatch(
  workload: WorkloadSelector,
  apiVersion: string,
  key: string,
  value: string,
): string {
  const body = setDeep(
    { apiVersion, kind: workload.kind, metadata: { name: workload.name } },
    podTemplateAnnotationPath(workload.kind, key),
    value,
  );
  const header =
    `# Written by gitops-reloader: rolls the pods of ${workload.kind} ${workload.name} when the configs it\n` +
    `# uses change. Listed under patches: in kustomization.yaml.\n`;
  return header + stringify(body, STRINGIFY);
}

// --- parsing ----------------------------------------------------------------------------------

/** Every document of a stream, or a ManifestEditError naming the first syntax error. */
export function parseStream(text: string): Document.Parsed[] {
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) return [];
  for (const d of docs) {
    const err = d.errors[0];
    if (err) throw new ManifestEditError(`not valid YAML: ${err.message.split('\n')[0]}`);
  }
  return docs;
}

// --- splicing ---------------------------------------------------------------------------------

interface Splice {
  start: number;
  end: number;
  insert: string;
}

type MapNode = YAMLMap<unknown, unknown>;
type PairNode = MapNode['items'][number];
type Range = [number, number, number];

// Plain where that reads back the same, quoted where it would not (a digest of only digits).
const STRINGIFY = { lineWidth: 0 } as const;

function rangeOf(node: unknown): Range {
  const r = (node as { range?: Range | null }).range;
  if (!r) throw new ManifestEditError('internal: a parsed node has no source range');
  return r;
}

function keyIs(key: unknown, name: string): boolean {
  if (!isScalar(key)) return false;
  const v = key.value;
  return v === name || ((typeof v === 'number' || typeof v === 'boolean') && String(v) === name);
}

/** The splices that make `path` hold `value` in `doc` (or none when it already does). */
function planSet(
  text: string,
  doc: Document.Parsed | undefined,
  path: readonly string[],
  value: string,
  eol: string,
): Splice[] {
  const root = doc?.contents ?? null;
  if (root === null || (isScalar(root) && root.value === null)) {
    // An empty document (an empty values.yaml, or one with only comments): append at the end, which
    // is only right when it is the last document.
    if (doc && rangeOf(doc)[2] < text.trimEnd().length) {
      throw new ManifestEditError('cannot add to an empty document in the middle of a stream');
    }
    return [insertLines(text, text.length, chainLines(path, value, 0, 2), eol)];
  }
  if (!isMap(root)) throw new ManifestEditError('the document is not a map');
  let map: MapNode = root;
  let step = 2;
  let parentKeyCol = -1;
  for (let i = 0; i < path.length; i++) {
    const seg = path[i] as string;
    const where = () => path.slice(0, i + 1).join('.');
    const pair = map.items.find((p) => keyIs(p.key, seg));
    if (!pair) return [insertIntoMap(text, map, path.slice(i), value, step, parentKeyCol, eol)];
    const v = pair.value;
    if (isAlias(v)) throw new ManifestEditError(`${where()} is a YAML alias; edit its anchor by hand`);
    if (i === path.length - 1) {
      if (isScalar(v) && v.value === value) return [];
      if (isScalar(v) && v.value === null && rangeOf(v)[0] === rangeOf(v)[1]) {
        // `key:` with nothing after it (perhaps a comment): the value goes right after the colon.
        const at = rangeOf(v)[0];
        const insert = `${text[at - 1] === ':' ? ' ' : ''}${renderScalar(value)}${text[at] === '#' ? ' ' : ''}`;
        return [{ start: at, end: at, insert }];
      }
      if (!isScalar(v))
        throw new ManifestEditError(`${where()} is a ${isMap(v) ? 'map' : 'list'}, not a string`);
      const [start, end] = rangeOf(v);
      const block = v.type === Scalar.BLOCK_FOLDED || v.type === Scalar.BLOCK_LITERAL;
      // A block scalar's range runs to the start of the next line; keep that line break.
      const insert = block ? `${renderScalar(value)}${eol}` : renderScalar(value, v.type);
      return [{ start, end, insert }];
    }
    if (isMap(v)) {
      const keyCol = column(text, rangeOf(pair.key)[0]);
      const first = v.items[0];
      if (!v.flow && first) {
        const childCol = column(text, rangeOf(first.key)[0]);
        if (childCol > keyCol) step = childCol - keyCol;
      }
      parentKeyCol = keyCol;
      map = v;
      continue;
    }
    if (v === null || (isScalar(v) && v.value === null)) {
      const keyCol = column(text, rangeOf(pair.key)[0]);
      return replaceNullWithLines(text, pair, chainLines(path.slice(i + 1), value, keyCol + step, step), eol);
    }
    throw new ManifestEditError(`${where()} is a ${isSeq(v) ? 'list' : 'string'}, not a map`);
  }
  throw new ManifestEditError('internal: path walk ended without a result');
}

/** Adds the missing tail of a path to an existing map, after its last entry. */
function insertIntoMap(
  text: string,
  map: MapNode,
  rest: readonly string[],
  value: string,
  step: number,
  parentKeyCol: number,
  eol: string,
): Splice {
  const [start, end] = rangeOf(map);
  if (map.flow) {
    const last = map.items.at(-1);
    if (last) {
      const after = rangeOf(last.value ?? last.key)[1];
      return { start: after, end: after, insert: `, ${flowChain(rest, value)}` };
    }
    if (parentKeyCol >= 0) {
      // `annotations: {}` under a block key becomes a block map, the form every later edit keeps.
      return replaceRangeWithLines(text, start, end, chainLines(rest, value, parentKeyCol + step, step), eol);
    }
    return { start, end, insert: `{${flowChain(rest, value)}}` };
  }
  const first = map.items[0];
  const col = first ? column(text, rangeOf(first.key)[0]) : 0;
  return insertLines(text, end, chainLines(rest, value, col, step), eol);
}

/** `key:` or `key: null` followed by new nested lines. */
function replaceNullWithLines(text: string, pair: PairNode, lines: string[], eol: string): Splice[] {
  const v = pair.value;
  if (v && isScalar(v) && rangeOf(v)[0] < rangeOf(v)[1]) {
    const [s, e] = rangeOf(v);
    return [replaceRangeWithLines(text, s, e, lines, eol)];
  }
  const keyEnd = rangeOf(pair.key)[1];
  return [insertLines(text, lineEnd(text, keyEnd), lines, eol)];
}

/** Removes [start, end) (a `{}`, `[]`, `~` or `null`) and puts `lines` on the lines after it. */
function replaceRangeWithLines(
  text: string,
  start: number,
  end: number,
  lines: string[],
  eol: string,
): Splice {
  const nl = text.indexOf('\n', end);
  const restOfLine = text.slice(end, nl === -1 ? text.length : nl).replace(/\r$/, '');
  let from = start;
  if (restOfLine.trim() === '') while (from > 0 && text[from - 1] === ' ') from--;
  const at = nl === -1 ? text.length : nl + 1;
  const tail = nl === -1 ? `${eol}${lines.join(eol)}` : `${lines.join(eol)}${eol}`;
  return { start: from, end: at, insert: `${text.slice(end, at)}${tail}` };
}

/** Inserts whole lines at `at`, which is the start of a line or the end of the text. */
function insertLines(text: string, at: number, lines: string[], eol: string): Splice {
  let pos = at;
  if (pos > 0 && pos <= text.length && text[pos - 1] !== '\n') pos = lineEnd(text, pos);
  if (pos >= text.length && text.length > 0 && !text.endsWith('\n')) {
    return { start: text.length, end: text.length, insert: `${eol}${lines.join(eol)}` };
  }
  return { start: pos, end: pos, insert: `${lines.join(eol)}${eol}` };
}

/** Offset of the start of the line after `pos` (or the end of the text). */
function lineEnd(text: string, pos: number): number {
  const nl = text.indexOf('\n', pos);
  return nl === -1 ? text.length : nl + 1;
}

function column(text: string, offset: number): number {
  return offset - (text.lastIndexOf('\n', offset - 1) + 1);
}

function applySplices(text: string, splices: Splice[]): string {
  const sorted = [...splices].sort((a, b) => b.start - a.start);
  let out = text;
  let limit = Number.POSITIVE_INFINITY;
  for (const s of sorted) {
    if (s.end > limit) throw new ManifestEditError('internal: two edits overlap');
    out = out.slice(0, s.start) + s.insert + out.slice(s.end);
    limit = s.start;
  }
  return out;
}

// --- rendering --------------------------------------------------------------------------------

/** Nested block lines for a path tail: `a:` / `  b:` / `    c: "value"`, starting at column `col`. */
function chainLines(rest: readonly string[], value: string, col: number, step: number): string[] {
  return rest.map((seg, j) => {
    const pad = ' '.repeat(col + j * step);
    return j === rest.length - 1
      ? `${pad}${renderKey(seg)}: ${renderScalar(value)}`
      : `${pad}${renderKey(seg)}:`;
  });
}

function flowChain(rest: readonly string[], value: string): string {
  const [head, ...tail] = rest;
  const key = renderKey(head as string, true);
  return tail.length === 0 ? `${key}: ${renderScalar(value)}` : `${key}: {${flowChain(tail, value)}}`;
}

/** A list item in block style: `- path: x` / `  target:` …, its dash at column `col`. */
function blockItemLines(item: object, col: number): string[] {
  const body = stringify(item, STRINGIFY).replace(/\n$/, '').split('\n');
  const pad = ' '.repeat(col);
  return body.map((line, i) => `${pad}${i === 0 ? '- ' : '  '}${line}`);
}

function appendToSeq(
  text: string,
  seq: YAMLSeq,
  pair: PairNode | undefined,
  item: object,
  eol: string,
): Splice {
  const [start, end] = rangeOf(seq);
  if (seq.flow) {
    const last = seq.items.at(-1);
    const flow = stringify(item, { ...STRINGIFY, collectionStyle: 'flow' }).trim();
    if (last) {
      const after = rangeOf(last)[1];
      return { start: after, end: after, insert: `, ${flow}` };
    }
    if (pair) {
      const keyCol = column(text, rangeOf(pair.key)[0]);
      return replaceRangeWithLines(text, start, end, blockItemLines(item, keyCol), eol);
    }
    return { start, end, insert: `[${flow}]` };
  }
  return insertLines(text, end, blockItemLines(item, column(text, start)), eol);
}

function rootSeqIndent(text: string, root: MapNode): number {
  for (const p of root.items) {
    if (isSeq(p.value) && !p.value.flow) return column(text, rangeOf(p.value)[0]);
  }
  return 0;
}

const PLAIN_SAFE = /^[A-Za-z0-9_][A-Za-z0-9_./-]*$/;

/** A string that reads back as itself in plain style (not a number, bool or null). */
function plainSafe(s: string): boolean {
  if (!PLAIN_SAFE.test(s)) return false;
  try {
    return parseDocument(s).toJS() === s;
  } catch {
    return false;
  }
}

function renderKey(key: string, flow = false): string {
  return plainSafe(key) && !(flow && /[,[\]{}]/.test(key)) ? key : JSON.stringify(key);
}

/**
 * The value in the style the old one had where that is safe: plain stays plain unless the value
 * would read as a number; single quotes stay single. New values are double-quoted, so a hex digest
 * of only digits is still a string.
 */
function renderScalar(value: string, style?: Scalar.Type): string {
  if (style === Scalar.PLAIN && plainSafe(value)) return value;
  if (style === Scalar.QUOTE_SINGLE && !/[\n\r]/.test(value)) return `'${value.replaceAll("'", "''")}'`;
  return JSON.stringify(value);
}

// --- verification ------------------------------------------------------------------------------

type Js = unknown[];

function setDeep(obj: unknown, path: readonly string[], value: string): Record<string, unknown> {
  const root: Record<string, unknown> =
    typeof obj === 'object' && obj !== null ? (obj as Record<string, unknown>) : {};
  let cur = root;
  for (let i = 0; i < path.length - 1; i++) {
    const seg = path[i] as string;
    const next = cur[seg];
    if (typeof next !== 'object' || next === null) cur[seg] = {};
    cur = cur[seg] as Record<string, unknown>;
  }
  cur[path[path.length - 1] as string] = value;
  return root;
}

/** The edited text must parse to the original with exactly the intended change. */
function verify(before: string, after: string, expect: (js: Js) => void): void {
  let got: Js;
  try {
    got = parseStream(after).map((d) => d.toJS());
  } catch (err) {
    throw new ManifestEditError(`internal: the edit produced invalid YAML (${(err as Error).message})`);
  }
  const want = parseStream(before).map((d) => d.toJS());
  if (want.length === 0) want.push(null);
  expect(want);
  if (!isDeepStrictEqual(JSON.parse(JSON.stringify(got)), JSON.parse(JSON.stringify(want)))) {
    throw new ManifestEditError(
      'this file is laid out in a way the editor cannot change without rewriting more than the one value; ' +
        'set it by hand once and later edits will keep it',
    );
  }
}
