// The local environment's git server: every bare repository under a directory, served over smart
// HTTP by `git http-backend` on 127.0.0.1, without authentication (loopback only). Argo CD's
// repo-server clones from it; tests and the demo push to it.
//
//   node test/cluster/git-daemon.ts <repos-dir> <port>
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { serveWithHttpBackend } from './git-http-backend.ts';

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
  void serveWithHttpBackend(req, res, { backend, root, user: 'anonymous' }).then(({ status, stderr }) =>
    console.log(`${req.method} ${u.pathname}${u.search} -> ${status}${stderr ? ` ${stderr.trim()}` : ''}`),
  );
});
server.listen(Number(portArg), '127.0.0.1', () =>
  console.log(`git server on 127.0.0.1:${portArg}, repositories in ${root}`),
);
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => server.close(() => process.exit(0)));
