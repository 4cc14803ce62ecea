// A real git server for tests: bare repositories served over smart HTTP (or https, with a CA of its
// own) by `git http-backend` (run as CGI by a small Node server) behind HTTP basic auth, on a loopback
// address only. The same bare repositories can be used over file://. It records every request with
// its headers, so a test can assert that no credential was sent, and it can answer with a redirect to
// another loopback host or port. Also small helpers to seed a repository and read what was pushed.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { serveWithHttpBackend } from '../cluster/git-http-backend.ts';
import { generatePki } from '../cluster/pki.ts';

const run = promisify(execFile);

/** Git with no user or system config, so the host's settings cannot change a test. */
export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', args, {
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: cwd,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_TERMINAL_PROMPT: '0',
      LC_ALL: 'C',
      GIT_AUTHOR_NAME: 'Test Person',
      GIT_AUTHOR_EMAIL: 'test@example.com',
      GIT_COMMITTER_NAME: 'Test Person',
      GIT_COMMITTER_EMAIL: 'test@example.com',
    },
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

export interface RequestInfo {
  repo: string;
  /** git-upload-pack (fetch/clone) or git-receive-pack (push). */
  service: string | undefined;
  method: string;
  /** The ref advertisement that starts every fetch or push (GET info/refs). */
  advertisement: boolean;
  /** The path and query, as sent. */
  url: string;
  /** Every request header, as Node parsed it (names in lower case). */
  headers: http.IncomingHttpHeaders;
  status?: number;
}

export interface GitServer {
  /** Directory holding the bare repositories (`<name>.git`; a name may hold `/`, as in `team-a/repo`). */
  root: string;
  /** With `tls`: the PEM file of the server's own CA, the one a client must be told to trust. */
  caFile?: string;
  username: string;
  password: string;
  /** The smart-HTTP URL of a repository, without credentials. */
  url(name: string): string;
  fileUrl(name: string): string;
  /** Creates a bare repository with one commit holding `files` on `branch`. */
  createRepo(name: string, files: Record<string, string>, branch?: string): Promise<void>;
  /** Commits `files` to `branch` of a repository directly (another writer moving the branch). */
  commitFiles(name: string, files: Record<string, string>, message: string, branch?: string): Promise<string>;
  /** Every request seen, newest last. */
  requests: RequestInfo[];
  /** Awaited before a request is served; a test uses it to move a branch between clone and push. */
  beforeRequest: ((info: RequestInfo) => Promise<void> | void) | undefined;
  /**
   * When set, every request is answered `302 Found` with Location `<redirectTo><path and query>`,
   * before authentication (as a hostile or misconfigured server would), e.g. another server's base URL.
   */
  redirectTo: string | undefined;
  /** The requests that carried an Authorization header. */
  authorized(): RequestInfo[];
  close(): Promise<void>;
}

export async function startGitServer(
  opts: {
    username?: string;
    password?: string;
    /** A loopback address: 127.0.0.1 (default), or another such as 127.0.0.2 for a second host. */
    host?: string;
    /** Serve every request without asking for credentials, as a hostile server collecting them would. */
    open?: boolean;
    /** Serve https, with a certificate for 127.0.0.1 from a CA of its own (`caFile`), trusted by nothing else. */
    tls?: boolean;
  } = {},
): Promise<GitServer> {
  const host = opts.host ?? '127.0.0.1';
  if (!/^127\./.test(host)) throw new Error(`the test git server listens on loopback only, not ${host}`);
  const root = await mkdtemp(path.join(tmpdir(), 'git-server-'));
  const username = opts.username ?? 'reloader';
  const password = opts.password ?? 's3cr3t-Tok3n-do-not-log';
  const backend = path.join((await git(root, '--exec-path')).trim(), 'git-http-backend');
  const expected = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  const requests: RequestInfo[] = [];

  const pki = opts.tls
    ? await generatePki(await mkdtemp(path.join(tmpdir(), 'git-server-ca-')), [])
    : undefined;
  const handler: http.RequestListener = (req, res) => {
    const u = new URL(req.url ?? '/', 'http://127.0.0.1');
    const repo = /^\/(.+?)\.git\//.exec(u.pathname)?.[1] ?? '';
    const advertisement = u.pathname.endsWith('/info/refs');
    const service = advertisement
      ? (u.searchParams.get('service') ?? undefined)
      : /\/(git-upload-pack|git-receive-pack)$/.exec(u.pathname)?.[1];
    const info: RequestInfo = {
      repo,
      service,
      method: req.method ?? 'GET',
      advertisement,
      url: req.url ?? '/',
      headers: { ...req.headers },
    };
    requests.push(info);
    if (srv.redirectTo !== undefined) {
      info.status = 302;
      res.writeHead(302, { Location: `${srv.redirectTo.replace(/\/+$/, '')}${req.url ?? '/'}` });
      res.end();
      req.resume();
      return;
    }
    if (!opts.open && req.headers.authorization !== expected) {
      info.status = 401;
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"', 'Content-Type': 'text/plain' });
      res.end('authentication required\n');
      req.resume();
      return;
    }
    void (async () => {
      await srv.beforeRequest?.(info);
      info.status = (await serveWithHttpBackend(req, res, { backend, root, user: username })).status;
    })().catch((err: Error) => {
      info.status = 500;
      res.writeHead(500);
      res.end(err.message);
    });
  };
  const server = pki
    ? https.createServer(
        { cert: await readFile(pki.serverCert), key: await readFile(pki.serverKey) },
        handler,
      )
    : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;

  const scheme = pki ? 'https' : 'http';
  const srv: GitServer = {
    root,
    ...(pki ? { caFile: pki.caCert } : {}),
    username,
    password,
    requests,
    beforeRequest: undefined,
    redirectTo: undefined,
    authorized: () => requests.filter((r) => r.headers.authorization !== undefined),
    url: (name) => `${scheme}://${host}:${port}/${name}.git`,
    fileUrl: (name) => `file://${path.join(root, `${name}.git`)}`,
    async createRepo(name, files, branch = 'main') {
      const bare = path.join(root, `${name}.git`);
      await mkdir(path.dirname(bare), { recursive: true });
      await git(root, 'init', '--quiet', '--bare', `--initial-branch=${branch}`, bare);
      const work = await mkdtemp(path.join(tmpdir(), 'git-seed-'));
      try {
        await git(work, 'init', '--quiet', `--initial-branch=${branch}`);
        await writeFiles(work, files);
        await git(work, 'add', '-A');
        await git(work, 'commit', '--quiet', '-m', 'Initial manifests');
        await git(work, 'push', '--quiet', bare, `HEAD:refs/heads/${branch}`);
      } finally {
        await rm(work, { recursive: true, force: true });
      }
    },
    async commitFiles(name, files, message, branch = 'main') {
      const bare = path.join(root, `${name}.git`);
      const work = await mkdtemp(path.join(tmpdir(), 'git-other-'));
      try {
        await git(work, 'clone', '--quiet', '--branch', branch, bare, '.');
        await writeFiles(work, files);
        await git(work, 'add', '-A');
        await git(work, 'commit', '--quiet', '-m', message);
        await git(work, 'push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`);
        return (await git(work, 'rev-parse', 'HEAD')).trim();
      } finally {
        await rm(work, { recursive: true, force: true });
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(root, { recursive: true, force: true });
      if (pki) await rm(pki.dir, { recursive: true, force: true });
    },
  };
  return srv;
}

async function writeFiles(dir: string, files: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(files)) {
    const full = path.join(dir, name);
    await mkdir(path.dirname(full), { recursive: true });
    await writeFile(full, text);
  }
}

/** What a bare repository holds: commits on a branch (newest first) and files at its tip. */
export const inspect = {
  async log(bare: string, branch = 'main'): Promise<Array<{ sha: string; subject: string; author: string }>> {
    const out = await git(bare, 'log', '--format=%H%x00%s%x00%an <%ae>', `refs/heads/${branch}`);
    return out
      .trim()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        const [sha = '', subject = '', author = ''] = l.split('\0');
        return { sha, subject, author };
      });
  },
  async show(bare: string, rev: string, file: string): Promise<string> {
    return git(bare, 'show', `${rev}:${file}`);
  },
  /** The unified diff of one commit, without the header. */
  async diff(bare: string, sha: string): Promise<string> {
    return git(bare, 'show', '--format=', '--unified=0', sha);
  },
  async branches(bare: string): Promise<string[]> {
    const out = await git(bare, 'for-each-ref', '--format=%(refname:short)', 'refs/heads');
    return out.trim().split('\n').filter(Boolean).sort();
  },
  async message(bare: string, sha: string): Promise<string> {
    return git(bare, 'log', '-1', '--format=%B', sha);
  },
};
