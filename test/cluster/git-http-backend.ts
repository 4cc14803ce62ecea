// Serves one HTTP request with `git http-backend` run as a CGI program: the smart-HTTP git
// protocol for the bare repositories under a directory. Used by the local environment's git server
// (git-daemon.ts) and by the tests' own git servers (test/support/git-server.ts).
import { spawn } from 'node:child_process';
import type http from 'node:http';

export interface BackendOptions {
  /** Path of the git-http-backend program (`$(git --exec-path)/git-http-backend`). */
  backend: string;
  /** The directory holding the bare repositories. */
  root: string;
  /** REMOTE_USER: http-backend allows push (receive-pack) only for an authenticated user. */
  user: string;
}

/** Runs http-backend for `req` and streams its answer to `res`; resolves with the HTTP status sent. */
export function serveWithHttpBackend(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  o: BackendOptions,
): Promise<{ status: number; stderr: string }> {
  const u = new URL(req.url ?? '/', 'http://127.0.0.1');
  const child = spawn(o.backend, [], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      GIT_PROJECT_ROOT: o.root,
      GIT_HTTP_EXPORT_ALL: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      HOME: o.root,
      PATH_INFO: u.pathname,
      QUERY_STRING: u.search.replace(/^\?/, ''),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
      HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
      GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      REMOTE_USER: o.user,
      REMOTE_ADDR: '127.0.0.1',
    },
  });
  req.pipe(child.stdin);
  return new Promise((resolve) => {
    let head = Buffer.alloc(0);
    let status = 0;
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (status !== 0) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      const headers: Record<string, string> = {};
      let code = 200;
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === 'status') code = Number.parseInt(value, 10);
        else headers[name] = value;
      }
      status = code;
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('close', () => {
      if (status === 0) {
        status = 500;
        res.writeHead(500);
      }
      res.end();
      resolve({ status, stderr });
    });
  });
}
