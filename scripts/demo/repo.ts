// The app's git repository on the cluster's git server: examples/demo/app.yaml as apps/web/app.yaml
// in a bare repository both engines read, and the commits of the demo's "person".
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../test/cluster/paths.ts';
import { onCleanUp } from './cleanup.ts';

const run = promisify(execFile);

/** git with no user or system config, as the demo's "person" committing to the app's repository. */
async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', args, {
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: cwd,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 'Demo Person',
      GIT_AUTHOR_EMAIL: 'demo@example.com',
      GIT_COMMITTER_NAME: 'Demo Person',
      GIT_COMMITTER_EMAIL: 'demo@example.com',
    },
  });
  return stdout.trim();
}

export interface AppRepo {
  /** The commit that deploys the app as examples/demo/app.yaml has it. */
  first: string;
  /** Commits and pushes the change the story is about; returns its sha. */
  changeConfigs(): Promise<string>;
}

/** Creates `<gitRoot>/demo-shop.git` (anew) with one commit deploying the app; removed at clean-up. */
export async function createAppRepo(gitRoot: string): Promise<AppRepo> {
  const bare = path.join(gitRoot, 'demo-shop.git');
  await rm(bare, { recursive: true, force: true });
  await git(gitRoot, 'init', '--quiet', '--bare', '--initial-branch=main', bare);
  onCleanUp(() => rm(bare, { recursive: true, force: true }));
  const work = await mkdtemp(path.join(tmpdir(), 'gr-demo-repo-'));
  onCleanUp(() => rm(work, { recursive: true, force: true }));
  await git(work, 'init', '--quiet', '--initial-branch=main');
  await mkdir(path.join(work, 'apps', 'web'), { recursive: true });
  const appYaml = path.join(work, 'apps', 'web', 'app.yaml');
  const source = await readFile(path.join(repoRoot, 'examples', 'demo', 'app.yaml'), 'utf8');
  await writeFile(appYaml, source);
  await git(work, 'add', '-A');
  await git(work, 'commit', '--quiet', '-m', 'Deploy the shop web app');
  await git(work, 'push', '--quiet', bare, 'HEAD:refs/heads/main');
  const first = await git(work, 'rev-parse', 'HEAD');
  return {
    first,
    async changeConfigs() {
      const docs = parseAllDocuments(source);
      for (const d of docs) {
        const name = d.getIn(['metadata', 'name']);
        if (name === 'web-config')
          d.setIn(['data', 'app.properties'], 'greeting=hello\nfeature.checkout=true\n');
        if (name === 'web-secret') d.setIn(['stringData', 'api-token'], 'demo-token-v2');
      }
      await writeFile(appYaml, docs.map((d) => d.toString()).join('---\n'));
      await git(work, 'commit', '--quiet', '-am', 'Turn on checkout and rotate the API token');
      await git(work, 'push', '--quiet', bare, 'HEAD:refs/heads/main');
      return git(work, 'rev-parse', 'HEAD');
    },
  };
}
