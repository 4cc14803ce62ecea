// Git write-back when the world is not cooperative: the branch moves between clone and push, many
// writers race for one repository, credentials are wrong, the remote is gone.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { type CommitChecksumResult, GitWriteError, GitWriter } from '../../git/writer.ts';
import { type GitServer, git, inspect, startGitServer } from '../support/git-server.ts';
import { diffLines, fakeHash, HASH_KEY, PLAIN_DEPLOYMENT, PLAIN_REPO } from './fixtures.ts';

let server: GitServer;
let scratch: string;
let writer: GitWriter;

beforeAll(async () => {
  server = await startGitServer();
  scratch = await mkdtemp(path.join(tmpdir(), 'conflicts-'));
  writer = new GitWriter({ tmpDir: scratch, allowInsecureHttp: true });
});
afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

const bare = (name: string) => path.join(server.root, `${name}.git`);
const creds = () => ({ username: server.username, token: server.password });
const fast = { attempts: 4, baseDelayMs: 10, maxDelayMs: 50 };

/** Every file under a directory, with its content. */
async function allFiles(dir: string): Promise<Array<{ file: string; text: string }>> {
  const out: Array<{ file: string; text: string }> = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const file = path.join(e.parentPath, e.name);
    out.push({ file, text: (await readFile(file)).toString('latin1') });
  }
  return out;
}

describe('git write-back under contention', () => {
  it('rebases onto a branch that moved between clone and push: one commit of ours, nothing lost', async () => {
    await server.createRepo('moved', PLAIN_REPO);
    let moved = false;
    server.beforeRequest = async (info) => {
      if (moved || info.repo !== 'moved' || info.service !== 'git-receive-pack' || !info.advertisement)
        return;
      moved = true;
      // Someone else changes the same file between our clone and our push.
      await server.commitFiles(
        'moved',
        {
          'apps/shop/deployment.yaml': PLAIN_DEPLOYMENT.replace(
            'spec:\n  template:',
            'spec:\n  replicas: 5\n  template:',
          ),
        },
        'Scale web to 5',
      );
    };
    try {
      const hash = fakeHash('moved');
      const r = await writer.commitChecksum({
        repoURL: server.url('moved'),
        branch: 'main',
        path: 'apps/shop',
        workloads: [{ kind: 'Deployment', name: 'web', namespace: 'shop', hash }],
        credentials: creds(),
        retry: fast,
      });
      expect(r).toMatchObject({ pushed: true, attempts: 2 });
      const log = await inspect.log(bare('moved'));
      expect(log.map((c) => c.subject)).toEqual([
        `chore(reload): shop/web config changed (config hash ${hash})`,
        'Scale web to 5',
        'Initial manifests',
      ]);
      expect(diffLines(await inspect.diff(bare('moved'), r.commit as string)).added).toEqual([
        `        ${HASH_KEY}: "${hash}"`,
      ]);
      const tip = parse(await inspect.show(bare('moved'), 'main', 'apps/shop/deployment.yaml'));
      expect(tip.spec.replicas).toBe(5);
      expect(tip.spec.template.metadata.annotations[HASH_KEY]).toBe(hash);
    } finally {
      server.beforeRequest = undefined;
    }
  });

  it('gives up after the retry limit when the branch keeps moving, leaving nothing of its own', async () => {
    await server.createRepo('busy', PLAIN_REPO);
    let n = 0;
    server.beforeRequest = async (info) => {
      if (info.repo !== 'busy' || info.service !== 'git-receive-pack' || !info.advertisement) return;
      n++;
      await server.commitFiles('busy', { [`notes/${n}.txt`]: `${n}\n` }, `Note ${n}`);
    };
    try {
      const err = await writer
        .commitChecksum({
          repoURL: server.url('busy'),
          branch: 'main',
          path: 'apps/shop',
          workloads: [{ kind: 'Deployment', name: 'web', hash: fakeHash('busy') }],
          credentials: creds(),
          retry: { attempts: 3, baseDelayMs: 5, maxDelayMs: 10 },
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GitWriteError);
      expect(err).toMatchObject({ reason: 'conflict', message: expect.stringMatching(/rejected 3 times/) });
      expect((await inspect.log(bare('busy'))).map((c) => c.subject)).toEqual([
        'Note 3',
        'Note 2',
        'Note 1',
        'Initial manifests',
      ]);
      expect(await readdir(scratch)).toEqual([]);
    } finally {
      server.beforeRequest = undefined;
    }
  });

  it('lands 20 concurrent bumps from 4 writers in at most 20 commits, none lost or duplicated', async () => {
    const many: Record<string, string> = { ...PLAIN_REPO };
    const names = Array.from({ length: 20 }, (_, i) => `svc-${String(i).padStart(2, '0')}`);
    // Half share one multi-document file, so re-applied edits meet changed text.
    many['apps/fleet/shared.yaml'] = names
      .slice(0, 10)
      .map((n) => PLAIN_DEPLOYMENT.replace('name: web ', `name: ${n}`))
      .join('---\n');
    for (const n of names.slice(10))
      many[`apps/fleet/${n}.yaml`] = PLAIN_DEPLOYMENT.replace('name: web ', `name: ${n}`);
    await server.createRepo('fleet', many);
    const before = (await inspect.log(bare('fleet'))).length;
    // Four writers stand for four processes: the lock inside each does nothing between them.
    const writers = Array.from(
      { length: 4 },
      () => new GitWriter({ tmpDir: scratch, allowInsecureHttp: true }),
    );
    const started = Date.now();
    const results: CommitChecksumResult[] = await Promise.all(
      names.map((name, i) =>
        (writers[i % 4] as GitWriter).commitChecksum({
          repoURL: server.url('fleet'),
          branch: 'main',
          path: 'apps/fleet',
          workloads: [{ kind: 'Deployment', name, namespace: 'shop', hash: fakeHash(name) }],
          credentials: creds(),
          retry: { attempts: 30, baseDelayMs: 20, maxDelayMs: 200 },
        }),
      ),
    );
    const seconds = (Date.now() - started) / 1000;
    const log = await inspect.log(bare('fleet'));
    const ours = log.slice(0, log.length - before);
    expect(results.every((r) => r.pushed)).toBe(true);
    expect(ours.length).toBeLessThanOrEqual(20);
    expect(new Set(results.map((r) => r.commit)).size).toBe(ours.length);
    // Each hash was added by exactly one commit.
    const added = new Map<string, number>();
    for (const c of ours) {
      for (const line of diffLines(await inspect.diff(bare('fleet'), c.sha)).added) {
        const m = new RegExp(`${HASH_KEY}: "([0-9a-f]{32})"`).exec(line);
        if (m?.[1]) added.set(m[1], (added.get(m[1]) ?? 0) + 1);
      }
    }
    expect([...added.entries()].sort()).toEqual(names.map((n) => [fakeHash(n), 1]).sort());
    // And every one is at the tip.
    const shared = parseAllDocuments(await inspect.show(bare('fleet'), 'main', 'apps/fleet/shared.yaml')).map(
      (d) => d.toJS(),
    );
    for (const doc of shared)
      expect(doc.spec.template.metadata.annotations[HASH_KEY]).toBe(fakeHash(doc.metadata.name));
    for (const n of names.slice(10)) {
      const doc = parse(await inspect.show(bare('fleet'), 'main', `apps/fleet/${n}.yaml`));
      expect(doc.spec.template.metadata.annotations[HASH_KEY]).toBe(fakeHash(n));
    }
    const attempts = results.map((r) => r.attempts);
    console.log(
      `[git] 20 bumps by 4 writers: ${ours.length} commits in ${seconds.toFixed(1)}s, attempts max ${Math.max(...attempts)}, total ${attempts.reduce((a, b) => a + b, 0)}`,
    );
    expect(await readdir(scratch)).toEqual([]);
  });

  it('coalesces concurrent requests to one repository within a writer into one commit', async () => {
    await server.createRepo('serial', PLAIN_REPO);
    const reqs = [
      { path: 'apps/shop', kind: 'Deployment' as const, name: 'web' },
      { path: 'apps/shop', kind: 'CronJob' as const, name: 'report' },
      { path: 'apps/other', kind: 'Deployment' as const, name: 'web2' },
    ];
    const results = await Promise.all(
      reqs.map((q) =>
        writer.commitChecksum({
          repoURL: server.url('serial'),
          branch: 'main',
          path: q.path,
          workloads: [{ kind: q.kind, name: q.name, namespace: 'shop', hash: fakeHash(q.name) }],
          credentials: creds(),
          retry: { attempts: 1 },
        }),
      ),
    );
    const log = await inspect.log(bare('serial'));
    expect(log).toHaveLength(2);
    expect(results.map((r) => [r.pushed, r.commit, r.attempts, r.workloads[0]?.status])).toEqual(
      reqs.map(() => [true, log[0]?.sha, 1, 'updated']),
    );
    expect(log[0]?.subject).toMatch(/shop\/web config changed .* and 2 more$/);
    expect(diffLines(await inspect.diff(bare('serial'), log[0]?.sha as string)).files).toEqual([
      'apps/other/deployment.yaml',
      'apps/shop/deployment.yaml',
      'apps/shop/jobs/workers.yaml',
    ]);

    // An older and a newer hash for one workload, queued together: the newer one is written, once.
    const bump = (hash: string) =>
      writer.commitChecksum({
        repoURL: server.url('serial'),
        branch: 'main',
        path: 'apps/shop',
        workloads: [{ kind: 'Deployment', name: 'web', namespace: 'shop', hash }],
        credentials: creds(),
      });
    const [older, newer] = await Promise.all([bump(fakeHash('older')), bump(fakeHash('newer'))]);
    expect(older?.commit).toBe(newer?.commit);
    expect(diffLines(await inspect.diff(bare('serial'), newer?.commit as string))).toEqual({
      removed: [`        ${HASH_KEY}: "${fakeHash('web')}"`],
      added: [`        ${HASH_KEY}: "${fakeHash('newer')}"`],
      files: ['apps/shop/deployment.yaml'],
    });
    expect((await inspect.log(bare('serial')))[0]?.subject).toBe(
      `chore(reload): shop/web config changed (config hash ${fakeHash('newer')})`,
    );
  });
});

describe('git write-back failures', () => {
  it('keeps credentials out of .git/config and off the disk, and removes its temp dir', async () => {
    await server.createRepo('secret', PLAIN_REPO);
    const seen: Array<{ file: string; text: string }> = [];
    server.beforeRequest = async (info) => {
      if (info.repo === 'secret' && info.service === 'git-receive-pack' && info.advertisement) {
        seen.push(...(await allFiles(scratch)));
      }
    };
    try {
      const r = await writer.commitChecksum({
        repoURL: server.url('secret'),
        credentials: creds(),
        branch: 'main',
        path: 'apps/shop',
        workloads: [{ kind: 'Deployment', name: 'web', hash: fakeHash('s') }],
      });
      expect(r.pushed).toBe(true);
    } finally {
      server.beforeRequest = undefined;
    }
    const config = seen.find((f) => f.file.endsWith(path.join('.git', 'config')));
    expect(config?.text).toContain(`url = ${server.url('secret')}`);
    const basic = Buffer.from(`${server.username}:${server.password}`).toString('base64');
    for (const f of seen) {
      expect(f.text.includes(server.password), f.file).toBe(false);
      expect(f.text.includes(basic), f.file).toBe(false);
    }
    expect(await readdir(scratch)).toEqual([]);
  });

  it('bad credentials: a clear auth error without the password, and no partial state', async () => {
    await server.createRepo('auth', PLAIN_REPO);
    const before = await inspect.log(bare('auth'));
    const wrong = 'Wr0ng-Passw0rd-value';
    for (const req of [
      { repoURL: server.url('auth'), credentials: { username: server.username, token: wrong } },
      {
        repoURL: server.url('auth').replace('http://', `http://${server.username}@`),
        credentials: { token: wrong },
      },
      { repoURL: server.url('auth') },
    ]) {
      const err = await writer
        .commitChecksum({
          ...req,
          branch: 'main',
          path: 'apps/shop',
          workloads: [{ kind: 'Deployment', name: 'web', hash: fakeHash('a') }],
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GitWriteError);
      expect((err as GitWriteError).reason).toBe('auth');
      expect((err as Error).message).toMatch(
        /authentication failed: the server (refused the credentials|wants credentials and none were given)/,
      );
      expect((err as Error).message).not.toContain(wrong);
      expect((err as Error).message).not.toContain(
        Buffer.from(`${server.username}:${wrong}`).toString('base64'),
      );
    }
    expect(await inspect.log(bare('auth'))).toEqual(before);
    expect(await readdir(scratch)).toEqual([]);
  });

  it('unreachable remote, missing repository or branch: a clear error naming the URL without userinfo', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await server.createRepo('branchless', PLAIN_REPO);
    await git(bare('branchless'), 'tag', 'v1.0.0', 'main');
    const cases: Array<[string, string, string]> = [
      [`http://bot@127.0.0.1:${port}/gone.git`, 'main', 'unreachable'],
      // A password in the URL is refused before anything is sent (service/core/repo-url.ts).
      [`http://bot:Sup3rSecret@127.0.0.1:${port}/gone.git`, 'main', 'invalid'],
      [server.url('does-not-exist'), 'main', 'repo-not-found'],
      [server.url('branchless'), 'release', 'branch-not-found'],
      [server.url('branchless'), 'v1.0.0', 'branch-not-found'],
    ];
    for (const [repoURL, branch, reason] of cases) {
      const err = await writer
        .commitChecksum({
          repoURL,
          branch,
          path: '.',
          workloads: [{ kind: 'Deployment', name: 'web', hash: 'h' }],
          credentials: repoURL.includes('bot') ? undefined : creds(),
        })
        .catch((e: unknown) => e);
      expect(err, repoURL).toMatchObject({ reason });
      expect((err as Error).message).not.toContain('Sup3rSecret');
      expect((err as Error).message).not.toContain(server.password);
    }
    expect(await readdir(scratch)).toEqual([]);
  });
});
