// There is no Docker engine here, so the Dockerfile is checked by reading it: every file it copies
// exists, its stages and user are what we promise, and the entrypoint it runs is really produced by
// `npm run build` and starts (laid out as in the image: package.json, node_modules and dist/ side by side).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { SERVICE_NODE_FLAGS } from '../../bench/service.ts';
import { repoRoot } from '../cluster/paths.ts';

const exec = promisify(execFile);

interface Instruction {
  op: string;
  args: string;
  stage: number;
}

interface Dockerfile {
  instructions: Instruction[];
  /** Base image of each stage, with ARG defaults substituted. */
  stages: Array<{ base: string; name?: string }>;
}

/** Reads a Dockerfile: joins continuation lines, drops comments, tracks stages and ARG defaults. */
function parseDockerfile(text: string): Dockerfile {
  const logical: string[] = [];
  let current = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line) && current === '') continue;
    if (/^\s*#/.test(line)) continue; // a comment inside a continued instruction
    const continued = /\\\s*$/.test(line);
    current += `${line.replace(/\\\s*$/, '')} `;
    if (!continued) {
      if (current.trim() !== '') logical.push(current.trim());
      current = '';
    }
  }
  const args = new Map<string, string>();
  const out: Dockerfile = { instructions: [], stages: [] };
  for (const l of logical) {
    const [op = '', ...rest] = l.split(/\s+/);
    const body = rest.join(' ');
    const OP = op.toUpperCase();
    if (OP === 'ARG' && out.stages.length === 0) {
      const [k, v] = body.split('=');
      if (k && v !== undefined) args.set(k, v);
    }
    if (OP === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(body);
      if (!m?.[1]) throw new Error(`cannot read ${l}`);
      const base = m[1].replace(/\$\{(\w+)\}/g, (_, k: string) => args.get(k) ?? `\${${k}}`);
      out.stages.push({ base, name: m[2] });
    }
    out.instructions.push({ op: OP, args: body, stage: out.stages.length - 1 });
  }
  return out;
}

async function dockerfile(): Promise<Dockerfile> {
  return parseDockerfile(await readFile(path.join(repoRoot, 'Dockerfile'), 'utf8'));
}

function finalStage(d: Dockerfile): Instruction[] {
  return d.instructions.filter((i) => i.stage === d.stages.length - 1);
}

function entrypoint(d: Dockerfile): string[] {
  const e = finalStage(d).filter((i) => i.op === 'ENTRYPOINT');
  if (e.length !== 1) throw new Error(`expected one ENTRYPOINT in the final stage, found ${e.length}`);
  return JSON.parse((e[0] as Instruction).args) as string[];
}

describe('the Dockerfile', () => {
  it('copies only files that exist in the repository, and stages that exist', async () => {
    const d = await dockerfile();
    const copies = d.instructions.filter((i) => i.op === 'COPY' || i.op === 'ADD');
    expect(copies.length).toBeGreaterThan(0);
    const missing: string[] = [];
    for (const c of copies) {
      const words = c.args.split(/\s+/);
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
      const paths = words.filter((w) => !w.startsWith('--'));
      const sources = paths.slice(0, -1);
      if (from) {
        if (!d.stages.slice(0, c.stage).some((s) => s.name === from))
          missing.push(`stage ${from} (${c.args})`);
        continue;
      }
      for (const s of sources) if (!existsSync(path.join(repoRoot, s))) missing.push(s);
    }
    expect(missing).toEqual([]);
  });

  it('compiles exactly the directories tsconfig.build.json includes', async () => {
    const d = await dockerfile();
    const build = JSON.parse(await readFile(path.join(repoRoot, 'tsconfig.build.json'), 'utf8')) as {
      include: string[];
    };
    const copiedDirs = d.instructions
      .filter((i) => i.op === 'COPY' && !i.args.includes('--from='))
      .map((i) => i.args.split(/\s+/)[0] as string)
      .filter((p) => !p.includes('.'));
    expect(copiedDirs.sort()).toEqual([...build.include].sort());
  });

  it('builds on the full Node 24 image and runs on Node 24 slim as uid 65534 under tini', async () => {
    const d = await dockerfile();
    expect(d.stages[0]?.base).toMatch(/^node:24(-[a-z]+)?$/);
    expect(d.stages.at(-1)?.base).toMatch(/^node:24(-[a-z]+)?-slim$/);
    const last = finalStage(d);
    expect(last.filter((i) => i.op === 'USER').map((i) => i.args)).toEqual(['65534:65534']);
    const run = last
      .filter((i) => i.op === 'RUN')
      .map((i) => i.args)
      .join('\n');
    expect(run).toMatch(/apt-get install [^\n]*\btini\b/);
    expect(run).toMatch(/apt-get install [^\n]*\bgit\b/);
    // Production dependencies only: node_modules comes from a stage that installed with --omit=dev.
    const modulesFrom = /--from=(\S+)\s+\S*node_modules/.exec(last.map((i) => i.args).join('\n'))?.[1];
    const depsStage = d.stages.findIndex((s) => s.name === modulesFrom);
    expect(depsStage).toBeGreaterThanOrEqual(0);
    const install = d.instructions.filter((i) => i.stage === depsStage && i.op === 'RUN').map((i) => i.args);
    expect(install.join('\n')).toMatch(/npm ci [^\n]*--omit=dev/);
    const e = entrypoint(d);
    expect(e.slice(0, 3)).toEqual(['/usr/bin/tini', '--', 'node']);
    expect(e).toContain('--enable-experimental-regexp-engine-on-excessive-backtracks');
  });

  it('runs node with the flags the bench measures the service with', async () => {
    // After `tini -- node`: node's own flags, up to the script.
    const flags = entrypoint(await dockerfile())
      .slice(3)
      .filter((a) => a.startsWith('--'));
    expect(flags).toEqual(SERVICE_NODE_FLAGS);
    expect(flags).toContain('--max-semi-space-size=1');
  });

  it('runs an entrypoint that `npm run build` produces', async () => {
    const d = await dockerfile();
    const e = entrypoint(d);
    const script = e.at(-1) as string;
    expect(script).toMatch(/^dist\/.+\.js$/);
    const workdir = finalStage(d)
      .filter((i) => i.op === 'WORKDIR')
      .at(-1)?.args;
    expect(workdir).toBe('/app');
    // The CMP wrapper script runs the same file by its absolute path.
    expect(finalStage(d).find((i) => i.op === 'RUN')?.args).toContain(`${workdir}/${script}`);

    const app = await mkdtemp(path.join(tmpdir(), 'gr-image-'));
    try {
      await exec('npm', ['run', 'build', '--', '--outDir', path.join(app, 'dist')], {
        cwd: repoRoot,
        maxBuffer: 16 * 1024 * 1024,
      });
      expect(existsSync(path.join(app, script)), `${script} after npm run build`).toBe(true);
      await copyFile(path.join(repoRoot, 'package.json'), path.join(app, 'package.json'));
      await symlink(path.join(repoRoot, 'node_modules'), path.join(app, 'node_modules'), 'dir');
      const node = e.slice(3, -1); // the node flags
      const { stdout } = await exec(process.execPath, [...node, script, 'help'], { cwd: app });
      expect(stdout).toContain('gitops-reloader serve [flags]');
    } finally {
      await rm(app, { recursive: true, force: true });
    }
  }, 120_000);
});
