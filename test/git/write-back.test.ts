// Git write-back against a real git server (git http-backend behind basic auth on loopback, and
// file://): one commit per change, only the annotation lines in it, nothing when already set.
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { checksum } from '../../git/checksum-command.ts';
import { injectChecksums } from '../../git/checksums.ts';
import { GitWriteError, GitWriter } from '../../git/writer.ts';
import { type GitServer, git, inspect, startGitServer } from '../support/git-server.ts';
import { diffLines, fakeHash, HASH_KEY, HELM_REPO, KUSTOMIZE_REPO, PLAIN_REPO } from './fixtures.ts';

let server: GitServer;
let scratch: string;
let writer: GitWriter;

beforeAll(async () => {
  server = await startGitServer();
  scratch = await mkdtemp(path.join(tmpdir(), 'write-back-'));
  writer = new GitWriter({ tmpDir: scratch, allowFileURLs: true, allowInsecureHttp: true });
});
afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

const bare = (name: string) => path.join(server.root, `${name}.git`);
const creds = () => ({ username: server.username, token: server.password });

describe('git write-back', () => {
  it('commits a plain-YAML change as one commit holding only the annotation line', async () => {
    await server.createRepo('plain', PLAIN_REPO);
    const hash = fakeHash('plain-1');
    const r = await writer.commitChecksum({
      repoURL: server.url('plain'),
      branch: 'main',
      path: 'apps/shop',
      workloads: [
        { kind: 'Deployment', name: 'web', namespace: 'shop', hash, configs: ['ConfigMap/web-config'] },
      ],
      credentials: creds(),
      author: { name: 'Reload Bot', email: 'bot@example.com' },
    });
    expect(r).toMatchObject({ pushed: true, attempts: 1, branch: 'main' });
    expect(r.workloads).toEqual([
      {
        kind: 'Deployment',
        name: 'web',
        namespace: 'shop',
        status: 'updated',
        files: ['apps/shop/deployment.yaml'],
      },
    ]);
    const log = await inspect.log(bare('plain'));
    expect(log).toHaveLength(2);
    expect(log[0]).toMatchObject({
      sha: r.commit,
      subject: 'chore(reload): shop/web config changed (ConfigMap/web-config)',
      author: 'Reload Bot <bot@example.com>',
    });
    expect(diffLines(await inspect.diff(bare('plain'), r.commit as string))).toEqual({
      added: [`        ${HASH_KEY}: "${hash}"`],
      removed: [],
      files: ['apps/shop/deployment.yaml'],
    });
    // Comments, key order (selector after template) and quoting are all still there.
    const after = await inspect.show(bare('plain'), 'main', 'apps/shop/deployment.yaml');
    expect(after).toBe(
      PLAIN_REPO['apps/shop/deployment.yaml']?.replace(
        "        prometheus.io/scrape: 'true'   # scraped by the shared Prometheus\n",
        `$&        ${HASH_KEY}: "${hash}"\n`,
      ),
    );
    expect(parse(after).spec.template.metadata.annotations[HASH_KEY]).toBe(hash);
  });

  it('makes no second commit for the same checksum', async () => {
    await server.createRepo('idem', PLAIN_REPO);
    const req = {
      repoURL: server.url('idem'),
      branch: 'main',
      path: 'apps/shop',
      workloads: [{ kind: 'CronJob' as const, name: 'report', hash: fakeHash('idem') }],
      credentials: creds(),
    };
    const first = await writer.commitChecksum(req);
    const second = await writer.commitChecksum(req);
    expect(first.pushed).toBe(true);
    expect(second).toEqual({
      pushed: false,
      attempts: 1,
      branch: 'main',
      workloads: [{ kind: 'CronJob', name: 'report', status: 'unchanged', files: [] }],
    });
    expect(await inspect.log(bare('idem'))).toHaveLength(2);
  });

  it('writes several workloads of one request as one commit, and reports the one it cannot find', async () => {
    await server.createRepo('multi', PLAIN_REPO);
    const r = await writer.commitChecksum({
      repoURL: server.url('multi'),
      branch: 'main',
      path: 'apps/shop',
      workloads: [
        {
          kind: 'CronJob',
          name: 'report',
          namespace: 'shop',
          hash: fakeHash('m1'),
          configs: ['ConfigMap/web-config'],
        },
        {
          kind: 'StatefulSet',
          name: 'queue',
          namespace: 'shop',
          hash: fakeHash('m2'),
          configs: ['Secret/q'],
        },
        { kind: 'Deployment', name: 'gone', namespace: 'shop', hash: fakeHash('m3') },
      ],
      credentials: creds(),
    });
    expect(r.workloads.map((w) => w.status)).toEqual(['updated', 'updated', 'failed']);
    expect(r.workloads[2]?.error).toMatch(/Deployment shop\/gone is not defined in any manifest/);
    const log = await inspect.log(bare('multi'));
    expect(log).toHaveLength(2);
    expect(log[0]?.subject).toBe(
      'chore(reload): shop/report config changed (ConfigMap/web-config) and 1 more',
    );
    expect(await inspect.message(bare('multi'), r.commit as string)).toContain(
      '- chore(reload): shop/queue config changed (Secret/q)',
    );
    const d = diffLines(await inspect.diff(bare('multi'), r.commit as string));
    expect(d.files).toEqual(['apps/shop/jobs/workers.yaml']);
    expect(d.removed).toEqual([]);
    expect(d.added).toEqual([
      '        metadata:',
      '          annotations:',
      `            ${HASH_KEY}: "${fakeHash('m1')}"`,
      '            annotations:',
      `                ${HASH_KEY}: "${fakeHash('m2')}"`,
    ]);
    const docs = parseAllDocuments(await inspect.show(bare('multi'), 'main', 'apps/shop/jobs/workers.yaml'));
    expect(docs[0]?.toJS().spec.jobTemplate.spec.template.metadata.annotations[HASH_KEY]).toBe(
      fakeHash('m1'),
    );
    expect(docs[1]?.toJS().spec.template.metadata.annotations[HASH_KEY]).toBe(fakeHash('m2'));
  });

  it('Kustomize: edits a resource of the overlay, and patches a shared base instead of editing it', async () => {
    await server.createRepo('kust', KUSTOMIZE_REPO);
    const hash = fakeHash('k1');
    const r = await writer.commitChecksum({
      repoURL: server.url('kust'),
      branch: 'main',
      path: 'overlays/prod',
      workloads: [
        { kind: 'Deployment', name: 'prod-web', namespace: 'shop-prod', hash },
        { kind: 'CronJob', name: 'prod-report', namespace: 'shop-prod', hash: fakeHash('k2') },
      ],
      credentials: creds(),
      annotationKey: 'checksum/config',
    });
    expect(r.workloads.map((w) => [w.status, w.files])).toEqual([
      ['updated', ['overlays/prod/gitops-reloader-deployment-web.yaml', 'overlays/prod/kustomization.yaml']],
      ['updated', ['overlays/prod/cron.yaml']],
    ]);
    const sha = r.commit as string;
    const show = (f: string) => inspect.show(bare('kust'), sha, f);
    // The base, shared with staging, is untouched.
    expect(await show('base/deployment.yaml')).toBe(KUSTOMIZE_REPO['base/deployment.yaml']);
    // Listed at the end, its items indented like resources:.
    expect(await show('overlays/prod/kustomization.yaml')).toBe(
      `${KUSTOMIZE_REPO['overlays/prod/kustomization.yaml']}patches:\n  - path: gitops-reloader-deployment-web.yaml\n    target:\n      kind: Deployment\n      name: web\n`,
    );
    expect(parse(await show('overlays/prod/gitops-reloader-deployment-web.yaml'))).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: { template: { metadata: { annotations: { 'checksum/config': hash } } } },
    });
    const cron = diffLines(
      await git(bare('kust'), 'show', '--format=', '--unified=0', sha, '--', 'overlays/prod/cron.yaml'),
    );
    expect(cron.added).toEqual([
      '        metadata:',
      '          annotations:',
      `            checksum/config: "${fakeHash('k2')}"`,
    ]);
    expect(cron.removed).toEqual([]);

    // The next change edits the patch now there: one line.
    const r2 = await writer.commitChecksum({
      repoURL: server.url('kust'),
      branch: 'main',
      path: 'overlays/prod',
      workloads: [{ kind: 'Deployment', name: 'prod-web', namespace: 'shop-prod', hash: fakeHash('k3') }],
      credentials: creds(),
      annotationKey: 'checksum/config',
    });
    expect(diffLines(await inspect.diff(bare('kust'), r2.commit as string))).toEqual({
      added: [`        checksum/config: ${fakeHash('k3')}`],
      removed: [`        checksum/config: ${hash}`],
      files: ['overlays/prod/gitops-reloader-deployment-web.yaml'],
    });
  });

  it('Helm: sets the values key, the default podAnnotations or the one the workload names', async () => {
    await server.createRepo('helm', HELM_REPO);
    const r = await writer.commitChecksum({
      repoURL: server.url('helm'),
      branch: 'main',
      path: 'charts/web',
      workloads: [
        { kind: 'Deployment', name: 'web', namespace: 'shop', hash: fakeHash('h1') },
        {
          kind: 'Deployment',
          name: 'web-worker',
          namespace: 'shop',
          hash: fakeHash('h2'),
          valuesPath: 'worker.podAnnotations',
        },
      ],
      credentials: creds(),
    });
    const d = diffLines(await inspect.diff(bare('helm'), r.commit as string));
    expect(d).toEqual({
      removed: ['podAnnotations: {}'],
      added: [
        'podAnnotations:',
        `  ${HASH_KEY}: "${fakeHash('h1')}"`,
        `    ${HASH_KEY}: "${fakeHash('h2')}"`,
      ],
      files: ['charts/web/values.yaml'],
    });
    const values = parse(await inspect.show(bare('helm'), 'main', 'charts/web/values.yaml'));
    expect(values.podAnnotations).toEqual({ [HASH_KEY]: fakeHash('h1') });
    expect(values.worker.podAnnotations).toEqual({ team: 'payments', [HASH_KEY]: fakeHash('h2') });
    // The templates are never parsed or touched.
    expect(await inspect.show(bare('helm'), 'main', 'charts/web/templates/deployment.yaml')).toBe(
      HELM_REPO['charts/web/templates/deployment.yaml'],
    );
  });

  it('base:target pushes to one review branch, builds on it while it exists, and recreates it from base', async () => {
    await server.createRepo('review', PLAIN_REPO);
    const req = (hash: string) => ({
      repoURL: server.url('review'),
      branch: 'main:gitops-reloader/shop',
      path: 'apps/shop',
      workloads: [{ kind: 'Deployment' as const, name: 'web', namespace: 'shop', hash }],
      credentials: creds(),
    });
    const mainTip = (await inspect.log(bare('review')))[0]?.sha;
    const a = await writer.commitChecksum(req(fakeHash('r1')));
    const b = await writer.commitChecksum(req(fakeHash('r2')));
    expect([a.branch, b.branch]).toEqual(['gitops-reloader/shop', 'gitops-reloader/shop']);
    expect(await inspect.branches(bare('review'))).toEqual(['gitops-reloader/shop', 'main']);
    expect((await inspect.log(bare('review')))[0]?.sha).toBe(mainTip);
    expect((await inspect.log(bare('review'), 'gitops-reloader/shop')).map((c) => c.sha)).toEqual([
      b.commit,
      a.commit,
      mainTip,
    ]);
    // Merged and deleted: the next change opens it again, from main.
    await git(bare('review'), 'update-ref', '-d', 'refs/heads/gitops-reloader/shop');
    const c = await writer.commitChecksum(req(fakeHash('r3')));
    expect((await inspect.log(bare('review'), 'gitops-reloader/shop')).map((x) => x.sha)).toEqual([
      c.commit,
      mainTip,
    ]);
  });

  it("writes to the remote's default branch for targetRevision HEAD", async () => {
    await server.createRepo('head', PLAIN_REPO, 'trunk');
    const r = await writer.commitChecksum({
      repoURL: server.url('head'),
      branch: 'HEAD',
      path: 'apps/shop',
      workloads: [{ kind: 'Deployment', name: 'web', hash: fakeHash('head') }],
      credentials: creds(),
    });
    expect(r).toMatchObject({ pushed: true, branch: 'trunk' });
    expect(await inspect.branches(bare('head'))).toEqual(['trunk']);
    expect((await inspect.log(bare('head'), 'trunk'))[0]?.sha).toBe(r.commit);
  });

  it('signs the commit with an SSH key when given one, verifiable against its public key', async () => {
    await server.createRepo('signed', PLAIN_REPO);
    // Outside scratch, which another test expects the writer to leave empty.
    const dir = await mkdtemp(path.join(tmpdir(), 'signing-'));
    const key = path.join(dir, 'key');
    await promisify(execFile)('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'bot', '-f', key]);
    // As a mounted Secret's file: world-readable, which ssh-keygen would refuse to sign with.
    await chmod(key, 0o644);
    const r = await writer.commitChecksum({
      repoURL: server.url('signed'),
      branch: 'main',
      path: 'apps/shop',
      workloads: [{ kind: 'Deployment', name: 'web', namespace: 'shop', hash: fakeHash('signed-1') }],
      credentials: creds(),
      author: { name: 'Reload Bot', email: 'bot@example.com' },
      signingKeyPath: key,
    });
    expect(r.pushed).toBe(true);
    const pub = (await readFile(`${key}.pub`, 'utf8')).trim();
    const signers = path.join(dir, 'allowed_signers');
    await writeFile(signers, `bot@example.com ${pub}\n`);
    const verified = await git(
      bare('signed'),
      '-c',
      `gpg.ssh.allowedSignersFile=${signers}`,
      'log',
      '-1',
      '--format=%G?',
      r.commit as string,
    );
    expect(verified.trim()).toBe('G');
    // Without a key, commits are unsigned.
    const plain = await writer.commitChecksum({
      repoURL: server.url('signed'),
      branch: 'main',
      path: 'apps/shop',
      workloads: [{ kind: 'Deployment', name: 'web', namespace: 'shop', hash: fakeHash('signed-2') }],
      credentials: creds(),
    });
    expect((await git(bare('signed'), 'log', '-1', '--format=%G?', plain.commit as string)).trim()).toBe('N');
  });

  /** A write of a repository holding `mib` MiB of incompressible blobs, by a writer with a 1 MiB limit. */
  async function writeTooLarge(repo: string, mib: number, opts: { sizeCheckEveryMs?: number } = {}) {
    const { randomBytes } = await import('node:crypto');
    const blobs = Object.fromEntries(
      Array.from({ length: mib / 3 }, (_, i) => [
        `blobs/${i}.bin`,
        randomBytes(3 * 1024 * 1024).toString('base64'),
      ]),
    );
    await server.createRepo(repo, { ...PLAIN_REPO, ...blobs });
    const small = new GitWriter({
      tmpDir: scratch,
      allowInsecureHttp: true,
      maxCheckoutBytes: 1024 * 1024,
      ...opts,
    });
    return small
      .commitChecksum({
        repoURL: server.url(repo),
        branch: 'main',
        path: 'apps/shop',
        workloads: [{ kind: 'Deployment', name: 'web', namespace: 'shop', hash: fakeHash(repo) }],
        credentials: creds(),
      })
      .catch((e: unknown) => e);
  }

  it('stops a clone that grows past the size limit, with a clear error, and leaves nothing behind', async () => {
    // Incompressible content, so the pack on disk is as large as the files.
    const err = await writeTooLarge('large', 6);
    expect(err).toBeInstanceOf(GitWriteError);
    expect(err).toMatchObject({ reason: 'too-large' });
    expect((err as Error).message).toMatch(/grew past 1 MiB .* --git-max-checkout-mib/);
    expect(await inspect.log(bare('large'))).toHaveLength(1);
    expect(await readdir(scratch)).toEqual([]);
  });

  it('refuses a clone git finished before the size guard first measured it', async () => {
    // On a fast disk git can clone several MiB between two timed measurements. Before the measurement
    // after each clone and fetch, this write went through (and a stop during rev-parse was reported as
    // "a tag, not a branch").
    const err = await writeTooLarge('large-fast', 3, { sizeCheckEveryMs: 3_600_000 });
    expect(err).toBeInstanceOf(GitWriteError);
    expect(err).toMatchObject({ reason: 'too-large' });
    expect((err as Error).message).toMatch(/clone branch main .*grew past 1 MiB .* --git-max-checkout-mib/);
    expect(await inspect.log(bare('large-fast'))).toHaveLength(1);
    expect(await readdir(scratch)).toEqual([]);
  });

  it('works over file:// and refuses file:// unless allowed', async () => {
    await server.createRepo('local', PLAIN_REPO);
    const req = {
      repoURL: server.fileUrl('local'),
      branch: 'main',
      path: 'apps/shop',
      workloads: [{ kind: 'Deployment' as const, name: 'web', hash: fakeHash('f1') }],
    };
    expect((await writer.commitChecksum(req)).pushed).toBe(true);
    await expect(new GitWriter().commitChecksum(req)).rejects.toMatchObject({ reason: 'invalid' });
    expect(await readdir(scratch)).toEqual([]);
  });

  it('commits the value gitops-reloader checksum computes, so the commit re-renders to the same checksum', async () => {
    await server.createRepo('render', PLAIN_REPO);
    const key = Buffer.from('render-test-key-'.repeat(3));
    const files = ['apps/shop/config.yaml', 'apps/shop/deployment.yaml', 'apps/shop/jobs/workers.yaml'];
    const expected = injectChecksums(
      files.map((f) => ({ name: f, text: PLAIN_REPO[f] ?? '' })),
      key,
      { annotation: HASH_KEY, namespace: 'shop' },
    ).workloads;
    expect(expected.map((w) => `${w.kind}/${w.name}`)).toEqual(['Deployment/web', 'CronJob/report']);
    await writer.commitChecksum({
      repoURL: server.url('render'),
      branch: 'main',
      path: 'apps/shop',
      workloads: expected.map((w) => ({ kind: w.kind, name: w.name, namespace: w.namespace, hash: w.hash })),
      credentials: creds(),
    });
    const work = await mkdtemp(path.join(tmpdir(), 'render-'));
    try {
      await git(work, 'clone', '--quiet', bare('render'), '.');
      const keyFile = path.join(work, '..', `${path.basename(work)}.key`);
      await writeFile(keyFile, key);
      const err: string[] = [];
      const io = { readStdin: async () => '', err: (t: string) => err.push(t) };
      const args = [path.join(work, 'apps/shop'), '--check', '--key-file', keyFile, '--namespace', 'shop'];
      expect(await checksum(args, {}, () => {}, io), err.join('')).toBe(0);
      expect(err.join('')).toContain('2 workload checksum(s) up to date');
      // A config change in git makes the committed value stale, as CI would see.
      const cfg = path.join(work, 'apps/shop/config.yaml');
      await writeFile(cfg, (await readFile(cfg, 'utf8')).replace('info', 'debug'));
      expect(await checksum(args, {}, () => {}, io)).toBe(1);
      await rm(keyFile);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });

  it('refuses a message template with an unknown placeholder and a branch that could be an option', async () => {
    const base = {
      repoURL: server.url('plain'),
      path: '.',
      workloads: [{ kind: 'Deployment' as const, name: 'web', hash: 'h' }],
    };
    await expect(
      writer.commitChecksum({ ...base, branch: 'main', messageTemplate: 'x {{app}}' }),
    ).rejects.toThrow(/unknown placeholder \{\{app\}\}/);
    await expect(writer.commitChecksum({ ...base, branch: '--upload-pack=x' })).rejects.toBeInstanceOf(
      GitWriteError,
    );
  });
});
