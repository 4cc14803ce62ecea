// One parser for the URLs that decide authority (issue 21): service/core/repo-url.ts. A second parser
// of a repository or cluster URL, anywhere in service/ or git/, is how a check and an action came to
// read one URL two ways (`team-a/..\team-b`), so none may appear: no WHATWG URL, no regex that reads
// a scheme, outside the module, except where listed with the reason the URL decides nothing.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sourceFiles } from '../test/support/source-files.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODULE = 'service/core/repo-url.ts';

/** file → why its URL parsing decides no authority. */
const ALLOWED: Record<string, string> = {
  'service/build-info.ts':
    "resolves the process's own files (package.json, build-info.json) by import.meta.url",
  'service/strategies/reload-webhook.ts': 'redacts the operator-set --reload-webhook URL for messages',
  'service/config/config.ts': 'validates the operator-set --webhook-url flag',
  'service/config/alert-flags.ts':
    'parses the operator-set alert webhook and proxy URLs once at start-up, for the alert sender only',
  'git/write-error.ts': 'removes userinfo from error text (redaction, not parsing)',
};

// WHATWG URL (new URL, URL.parse, URL.canParse), Node's legacy url.parse, and a regex literal that
// matches a scheme separator (`:\/\/`): each is a parser of its own.
const PARSERS = /\bnew URL\(|\bURL\.(?:parse|canParse)\(|\burl\.parse\(|\/[^/\n]*:\\\/\\\/[^/\n]*\/[a-z]*/;

function offenders(files: readonly string[]): string[] {
  return files.flatMap((f) => {
    const rel = relative(root, f);
    if (rel === MODULE || ALLOWED[rel]) return [];
    return readFileSync(f, 'utf8')
      .split('\n')
      .flatMap((line, i) =>
        PARSERS.test(line) && !/^\s*(\/\/|\*)/.test(line) ? [`${rel}:${i + 1}: ${line.trim()}`] : [],
      );
  });
}

describe('one parser for URLs that decide authority', () => {
  const files = ['service', 'git'].flatMap((d) => sourceFiles(join(root, d)));

  it('finds a second parser when there is one', () => {
    // Guards the check below against passing because the pattern matches nothing.
    expect(PARSERS.test('const u = new URL(repoURL);')).toBe(true);
    expect(PARSERS.test('if (/^https?:\\/\\//i.test(repoURL)) {')).toBe(true);
    expect(PARSERS.test('URL.canParse(x)')).toBe(true);
    expect(PARSERS.test('const x = parseRepoURL(raw);')).toBe(false);
    expect(files.map((f) => relative(root, f))).toContain(MODULE);
  });

  it('parses repository, credential and cluster URLs only in service/core/repo-url.ts', () => {
    expect(offenders(files)).toEqual([]);
  });

  it('lists no exception that is gone, so the list cannot grow stale', () => {
    const uses = Object.keys(ALLOWED).filter((rel) => PARSERS.test(readFileSync(join(root, rel), 'utf8')));
    expect(uses.sort()).toEqual(Object.keys(ALLOWED).sort());
  });

  it('the modules that check or contact a repository take it from the one parser', () => {
    for (const rel of [
      'service/gitops/authority.ts',
      'service/gitops/credentials.ts',
      'service/gitops/application.ts',
      'service/strategies/git-commit.ts',
      'git/writer.ts',
    ]) {
      expect(readFileSync(join(root, rel), 'utf8'), rel).toMatch(
        /from '(\.\.\/)+(service\/)?core\/repo-url\.ts'/,
      );
    }
  });
});
