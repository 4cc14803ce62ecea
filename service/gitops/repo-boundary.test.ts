// The tenant boundary of git mode, over generated repository URLs: the URL the AppProject check
// allows, the URL a credential is bound to, and the URL the writer gives git (with the token header
// scoped to it) are one canonical identity, and a URL allowed or bound under team-a never reaches a
// path outside team-a, however a server resolves it. Known attack shapes are fixed cases.
import { posix } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GitWriteError } from '../../git/write-error.ts';
import { GitWriter, parseRemote } from '../../git/writer.ts';
import { parseRepoURL, tryParseRepoURL } from '../core/repo-url.ts';
import { gitSourceOf } from './application.ts';
import { sourcePermitted } from './authority.ts';
import { allowedByList, boundTo, matchRepoSecret } from './credentials.ts';
import { GitRefused } from './refusal.ts';

const HTTPS_PREFIX = 'https://git.example/team-a';
const SSH_PREFIX = 'git@git.example:team-a';

/** The table, with scp-like SSH and ssh:// variants of each row. */
const TABLE = [
  'https://git.example/team-a/..\\team-b\\repo',
  'https://git.example/team-a/../team-b/repo',
  'https://git.example/team-a/%2e%2e/team-b/repo',
];
const variants = (u: string) => [
  u,
  u.replace('https://git.example/', 'git@git.example:'),
  u.replace('https://', 'ssh://git@'),
  `${u}.git`,
  u.replace(/%2e/g, '%2E'),
];
const FIXED = [...new Set(TABLE.flatMap(variants))];

/**
 * Where a server ends up for a URL git is given: host and the path after percent-decoding, `\` read
 * as `/` (WHATWG for https, Windows servers) and dot segments resolved, the most generous reading.
 */
function serverSide(contacted: string): { host: string; path: string } {
  const scp = /^(?:[^@/:]+@)?([^/:@]+):(?!\/\/)(.*)$/.exec(contacted);
  const url = /^[a-z]+:\/\/(?:[^@/]*@)?([^/]*)(.*)$/.exec(contacted);
  const [host, raw] = scp ? [scp[1] as string, `/${scp[2]}`] : [url?.[1] ?? '', url?.[2] ?? ''];
  const decoded = raw.replace(/%([0-9a-f]{2})/gi, (_, h: string) =>
    String.fromCharCode(Number.parseInt(h, 16)),
  );
  return {
    host: host.toLowerCase().replace(/:(443|22)$/, ''),
    // `x.git` and `x` are one repository to git servers (and to Argo CD).
    path: posix.normalize(decoded.replace(/\\/g, '/')).replace(/\.git$/, ''),
  };
}

const segment = fc.constantFrom(
  'team-a',
  'team-b',
  'repo',
  'x',
  '.',
  '..',
  '%2e',
  '%2E%2e',
  '.%2e',
  '%2f',
  '%5c',
  '..\\team-b',
  '\\',
  '',
  '%41',
  'a%20b',
  'repo.git',
  '...',
  '.git',
  'team-a%2f..',
  'team-abc',
  '..;',
  'a;b',
);
const host = fc.constantFrom('git.example', 'GIT.Example', 'git.example.evil', 'evil', 'git.example:8443');
const generatedURL = fc
  .record({
    form: fc.constantFrom('https', 'ssh', 'scp'),
    user: fc.constantFrom('', 'git@', 'bot@'),
    host,
    port: fc.constantFrom('', ':443', ':22'),
    segments: fc.array(segment, { minLength: 1, maxLength: 6 }),
    tail: fc.constantFrom('', '/', '.git', '.git/'),
  })
  .map(({ form, user, host, port, segments, tail }) => {
    const path = `${segments.join('/')}${tail}`;
    if (form === 'scp') return `${user || 'git@'}${host.replace(/:\d+$/, '')}:${path}`;
    return `${form}://${form === 'ssh' ? user || 'git@' : user}${host}${port}/${path}`;
  });

/** A URL whose raw spelling holds a shape that some parser would resolve. */
const hostile = (raw: string) => {
  const path = raw.replace(/^[a-z]+:\/\/[^/]*|^[^@/:]+@[^/:]+:/, '');
  return (
    raw.includes('\\') ||
    /%(2e|2f|5c)/i.test(raw) ||
    path.split('/').some((s) => ['.', '..', '...git', '..git'].includes(s.split(';')[0] as string))
  );
};

const writerURL = (raw: string) => parseRemote(raw, false, true).url;

describe('one identity from check to contact (property)', () => {
  it('refuses every URL with a dot segment, a backslash or an encoded . / \\, in the parser and the writer', () => {
    fc.assert(
      fc.property(generatedURL, (raw) => {
        if (!hostile(raw)) return;
        expect(tryParseRepoURL(raw)).toBeUndefined();
        expect(() => writerURL(raw)).toThrow(GitWriteError);
      }),
      { numRuns: 2000 },
    );
  });

  it('contacts the identity that was checked: the writer parses the same canonical form it was given', () => {
    fc.assert(
      fc.property(generatedURL, (raw) => {
        const id = tryParseRepoURL(raw);
        if (!id) return;
        const contacted = writerURL(raw);
        expect(parseRepoURL(contacted).canonical).toBe(id.canonical);
        // And git's header scope is that URL: a clone of it is what the header is sent with.
        expect(parseRemote(contacted, false, true).url).toBe(contacted);
      }),
      { numRuns: 2000 },
    );
  });

  it('a URL bound to, or allowed under, team-a never reaches a path outside team-a', () => {
    fc.assert(
      fc.property(generatedURL, (raw) => {
        const id = tryParseRepoURL(raw);
        if (!id) return;
        const grants = [
          boundTo(id, HTTPS_PREFIX),
          boundTo(id, SSH_PREFIX),
          allowedByList(id, [HTTPS_PREFIX, SSH_PREFIX]),
          sourcePermitted([`${HTTPS_PREFIX}/*`, `${SSH_PREFIX}/*`], id),
          sourcePermitted([`${HTTPS_PREFIX}/**`, `${SSH_PREFIX}/**`], id),
          matchRepoSecret(
            [
              {
                namespace: 'argocd',
                name: 'a',
                type: 'repo-creds',
                data: { url: HTTPS_PREFIX, password: 'p' },
              },
            ],
            id,
            'default',
          ) !== undefined,
        ];
        if (!grants.some(Boolean)) return;
        const reached = serverSide(writerURL(raw));
        expect(reached.host).toBe('git.example');
        // The prefix itself (a repository named team-a) or what lies under it.
        expect(reached.path === '/team-a' || reached.path.startsWith('/team-a/')).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it('`team-a/*` allows exactly one segment under team-a, as the server reads it', () => {
    fc.assert(
      fc.property(generatedURL, (raw) => {
        const id = tryParseRepoURL(raw);
        if (!id || !sourcePermitted([`${HTTPS_PREFIX}/*`], id)) return;
        expect(serverSide(writerURL(raw)).path).toMatch(/^\/team-a\/[^/]+$/);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("the issue's table, its SSH and ** variants (fixed cases)", () => {
  it.each(FIXED)(
    '%s: refused by the parser, the project check, the credentials and the writer',
    async (raw) => {
      expect(tryParseRepoURL(raw)).toBeUndefined();
      expect(() =>
        gitSourceOf(
          { spec: { project: 'team-a', source: { repoURL: raw, path: 'apps' } } },
          { namespace: 'argocd', name: 'a' },
        ),
      ).toThrow(GitRefused);
      // The writer refuses before it runs git: nothing is cloned, nothing is sent.
      await expect(
        new GitWriter().commitChecksum({
          repoURL: raw,
          branch: 'main',
          path: '',
          workloads: [{ kind: 'Deployment', name: 'w', hash: 'h' }],
        }),
      ).rejects.toMatchObject({
        reason: 'invalid',
        message: expect.stringMatching(/^repository URL refused/),
      });
    },
  );

  it('before this parser, WHATWG resolved each row to team-b, the repository the check never saw', () => {
    // What `new URL()` (the writer's old parser) made of the rows: the reason they are refused now.
    for (const raw of TABLE) expect(new URL(raw).pathname).toBe('/team-b/repo');
  });
});
