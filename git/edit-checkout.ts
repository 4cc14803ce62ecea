// Writes workloads' checksums into a checkout: locate the file for each workload, edit its text,
// write it back. Files are written only inside the checkout and never through a symlink, so a
// repository cannot steer the write to a file of the service's own.
import { createHash } from 'node:crypto';
import { lstat, mkdir, readFile, realpath, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type LocateTarget, locateWorkload, type WorkloadLocation } from './locate.ts';
import {
  addKustomizePatch,
  type EditResult,
  ManifestEditError,
  setPodTemplateAnnotation,
  setValuesKey,
  strategicMergePatch,
} from './manifest-edit.ts';

export interface ChecksumTarget extends LocateTarget {
  /** The value to write: the workload's config hash. */
  hash: string;
}

export type TargetOutcome =
  | { target: ChecksumTarget; status: 'updated' | 'unchanged'; files: string[]; location: WorkloadLocation }
  | { target: ChecksumTarget; status: 'failed'; error: string };

/**
 * Sets every target's checksum in the checkout at `root` (Argo CD source path `appPath`). A target
 * that cannot be located or edited is reported as failed; the others are still written.
 */
export async function editCheckout(
  root: string,
  appPath: string,
  targets: readonly ChecksumTarget[],
): Promise<TargetOutcome[]> {
  const located: Array<{ target: ChecksumTarget; location?: WorkloadLocation; error?: string }> = [];
  for (const target of targets) {
    try {
      located.push({ target, location: await locateWorkload(root, appPath, target) });
    } catch (err) {
      located.push({ target, error: (err as Error).message });
    }
  }
  const values = helmValues(located);
  const out: TargetOutcome[] = [];
  for (const { target, location, error } of located) {
    if (!location) {
      out.push({ target, status: 'failed', error: error ?? 'not located' });
      continue;
    }
    try {
      const files = await apply(root, location, target, values.get(target) ?? target.hash);
      out.push({ target, status: files.length > 0 ? 'updated' : 'unchanged', files, location });
    } catch (err) {
      out.push({ target, status: 'failed', error: (err as Error).message });
    }
  }
  // Workloads that share a Helm values key were all updated by the one edit of it.
  const changedKeys = new Map<string, string[]>();
  for (const o of out)
    if (o.status === 'updated' && o.location.type === 'helm-values')
      changedKeys.set(helmKey(o.location), o.files);
  return out.map((o) => {
    const files =
      o.status === 'unchanged' && o.location.type === 'helm-values'
        ? changedKeys.get(helmKey(o.location))
        : undefined;
    return files && o.status === 'unchanged' ? { ...o, status: 'updated', files } : o;
  });
}

const helmKey = (l: Extract<WorkloadLocation, { type: 'helm-values' }>) =>
  JSON.stringify([l.file, l.valuesPath]);

/**
 * Workloads of one chart that share a values key (the common `podAnnotations`) get one value that
 * changes when any of their hashes does: the key is read by all their templates anyway.
 */
function helmValues(located: Array<{ target: ChecksumTarget; location?: WorkloadLocation }>) {
  const groups = new Map<string, ChecksumTarget[]>();
  for (const { target, location } of located) {
    if (location?.type !== 'helm-values') continue;
    const id = helmKey(location);
    groups.set(id, [...(groups.get(id) ?? []), target]);
  }
  const values = new Map<ChecksumTarget, string>();
  for (const members of groups.values()) {
    if (new Set(members.map((m) => m.hash)).size <= 1) continue;
    const combined = combineHashes(members.map((m) => [`${m.kind}/${m.namespace ?? ''}/${m.name}`, m.hash]));
    for (const m of members) values.set(m, combined);
  }
  return values;
}

/** One value for several workloads' hashes. The inputs are already keyed digests, so a plain hash is enough. */
export function combineHashes(pairs: Array<[string, string]>): string {
  const sorted = [...pairs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256')
    .update(`gitops-reloader/combined/v1\n${JSON.stringify(sorted)}`)
    .digest('hex')
    .slice(0, 32);
}

/** Applies one located edit; returns the files it changed. */
async function apply(
  root: string,
  loc: WorkloadLocation,
  target: ChecksumTarget,
  value: string,
): Promise<string[]> {
  const key = target.annotationKey;
  switch (loc.type) {
    case 'manifest': {
      const text = await read(root, loc.file);
      const r = setPodTemplateAnnotation(text ?? '', loc.select, key, value);
      if (r.matched === 0)
        throw new ManifestEditError(`${loc.file} no longer defines ${target.kind} ${target.name}`);
      return (await write(root, loc.file, r)) ? [loc.file] : [];
    }
    case 'helm-values': {
      const text = (await read(root, loc.file)) ?? '';
      return (await write(root, loc.file, setValuesKey(text, loc.valuesPath, value))) ? [loc.file] : [];
    }
    case 'kustomize-new-patch': {
      const existing = await read(root, loc.patchFile);
      const patch =
        existing === undefined
          ? { text: strategicMergePatch(loc.select, loc.apiVersion, key, value), changed: true, matched: 1 }
          : setPodTemplateAnnotation(existing, loc.select, key, value);
      if (patch.matched === 0) {
        throw new ManifestEditError(
          `${loc.patchFile} exists and is not a patch for ${loc.select.kind} ${loc.select.name}`,
        );
      }
      const kText = (await read(root, loc.kustomization)) ?? '';
      const rel = path.posix.relative(path.posix.dirname(loc.kustomization), loc.patchFile);
      const listed = addKustomizePatch(kText, {
        path: rel,
        target: { kind: loc.select.kind, name: loc.select.name },
      });
      const files: string[] = [];
      if (await write(root, loc.patchFile, patch)) files.push(loc.patchFile);
      if (await write(root, loc.kustomization, listed)) files.push(loc.kustomization);
      return files;
    }
  }
}

async function read(root: string, rel: string): Promise<string | undefined> {
  const full = await safePath(root, rel);
  try {
    return await readFile(full, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

async function write(root: string, rel: string, r: EditResult): Promise<boolean> {
  if (!r.changed) return false;
  const full = await safePath(root, rel);
  await mkdir(path.dirname(full), { recursive: true });
  await safePath(root, rel);
  await writeFile(full, r.text, 'utf8');
  return true;
}

/** The absolute path of `rel`, after checking that neither it nor a parent escapes the checkout. */
async function safePath(root: string, rel: string): Promise<string> {
  const realRoot = await realpath(root);
  const full = path.resolve(realRoot, rel);
  const outside = (p: string) => {
    const r = path.relative(realRoot, p);
    return r.startsWith('..') || path.isAbsolute(r);
  };
  if (outside(full)) throw new ManifestEditError(`refusing to write ${rel}: outside the repository`);
  let dir = path.dirname(full);
  // The deepest existing parent must resolve inside the checkout (no symlinked directory).
  for (;;) {
    try {
      if (outside(await realpath(dir)))
        throw new ManifestEditError(`refusing to write ${rel}: a parent is a symlink`);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      dir = path.dirname(dir);
    }
  }
  try {
    if ((await lstat(full)).isSymbolicLink())
      throw new ManifestEditError(`refusing to write ${rel}: it is a symlink`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  return full;
}
