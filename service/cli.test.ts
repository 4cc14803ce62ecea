// The CLI as a user meets it: spawned as a process, as `gitops-reloader` runs.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cli.ts');

function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { timeout: 20_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('gitops-reloader CLI', () => {
  const commands: [string, RegExp][] = [
    ['serve', /--debounce <duration>/],
    ['plan', /--configmap <string>/],
    ['checksum', /--key-file <string>/],
    ['tenant-key', /--namespace <list>/],
    ['resume', /--kubeconfig <string>/],
    ['migrate', /--deployment <string>/],
    ['version', /gitops-reloader --version/],
  ];
  for (const [cmd, flag] of commands) {
    for (const h of ['--help', '-h']) {
      it(`${cmd} ${h} prints that command's usage and flags, exit 0`, async () => {
        const r = await run(cmd, h);
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(r.stdout).toContain(`gitops-reloader ${cmd}`);
        expect(r.stdout).toMatch(flag);
      });
    }
  }

  it('--help after other flags still prints the usage, and a -- ends the flags', async () => {
    expect((await run('plan', '--namespace', 'x', '--help')).code).toBe(0);
    const after = await run('plan', '--', '--help');
    expect(after.code).toBe(2);
  });

  for (const args of [['version'], ['--version']]) {
    it(`${args.join(' ')} prints the version, the git commit and the Node.js version`, async () => {
      const r = await run(...args);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^gitops-reloader \d+\.\d+\.\d+\ncommit: ([0-9a-f]{40}|unknown)\nnode: /);
      expect(r.stdout).toContain(`node: ${process.versions.node}`);
    });
  }

  const errors: [string[], string][] = [
    [
      ['serve', '--no-such-flag'],
      "gitops-reloader serve: unknown flag --no-such-flag. Run 'gitops-reloader serve --help' for usage.\n",
    ],
    [
      ['plan', '--namespace'],
      "gitops-reloader plan: flag --namespace needs a value. Run 'gitops-reloader plan --help' for usage.\n",
    ],
    [
      ['migrate', '-v'],
      'gitops-reloader migrate: unknown flag -v: flags are written with two dashes, as in --v.',
    ],
    [
      ['serve', '--debounce=soon'],
      'gitops-reloader serve: invalid value "soon" for --debounce (flag): expected a duration',
    ],
    [
      ['frob'],
      'gitops-reloader: unknown command "frob"; the commands are serve, status, resume, plan, checksum, tenant-key, migrate, version, help.',
    ],
  ];
  for (const [args, message] of errors) {
    it(`${args.join(' ')} fails with a sentence of ours naming the flag or argument`, async () => {
      const r = await run(...args);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(message);
      // Node's parseArgs wording never reaches the user.
      expect(r.stderr).not.toMatch(/Unknown option|To specify a positional|ERR_PARSE_ARGS/);
    });
  }
});
