// The local environment's git server: every bare repository under a directory, served over smart
// HTTP by `git http-backend` on 127.0.0.1, without authentication (loopback only). Argo CD's
// repo-server clones from it; tests and the demo push to it.
//
//   node test/cluster/git-daemon.ts <repos-dir> <port>
import { execFileSync, spawn } from 'node:child_process';
import http from 'node:http';

const [root, portArg] = process.argv.slice(2);
if (!root || !portArg) {
  console.error('usage: git-daemon.ts <repos-dir> <port>');
  process.exit(2);
}
const backend = `${execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim()}/git-http-backend`;

const server = http.createServer((req, res) => {
  const u = new URL(req.url ?? '/', 'http://127.0.0.1');
  if (u.pathname === '/healthz') {
    res.end('ok\n');
    return;
  }
  const child = spawn(backend, [], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      HOME: root,
      PATH_INFO: u.pathname,
      QUERY_STRING: u.search.replace(/^\?/, ''),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
      HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
      GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      // http-backend allows push (receive-pack) only for an authenticated user.
      REMOTE_USER: 'anonymous',
      REMOTE_ADDR: '127.0.0.1',
    },
  });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let sent = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (sent) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end === -1) return;
    let status = 200;
    for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
      const i = line.indexOf(':');
      const name = line.slice(0, i).trim();
      const value = line.slice(i + 1).trim();
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end + 4));
    sent = true;
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  child.on('close', (code) => {
    if (!sent) res.writeHead(500);
    res.end();
    console.log(
      `${req.method} ${u.pathname}${u.search} -> ${sent ? 'ok' : 'failed'} (${code})${stderr ? ` ${stderr.trim()}` : ''}`,
    );
  });
});
server.listen(Number(portArg), '127.0.0.1', () =>
  console.log(`git server on 127.0.0.1:${portArg}, repositories in ${root}`),
);
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => server.close(() => process.exit(0)));
