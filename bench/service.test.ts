import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../test/cluster/paths.ts';
import { cliHasFlag } from './service.ts';

// The source CLI answers as the compiled one does (the bench runs dist/, which a unit test cannot
// assume is built).
const SOURCE_CLI = path.join(repoRoot, 'service', 'cli.ts');

describe('cliHasFlag', () => {
  it("finds serve's flags, which `help` alone no longer lists", () => {
    expect(cliHasFlag('--http-address', SOURCE_CLI)).toBe(true);
    expect(cliHasFlag('--status-address', SOURCE_CLI)).toBe(true);
    expect(cliHasFlag('--hub', SOURCE_CLI)).toBe(true);
  });

  it('does not find a flag the CLI lacks', () => {
    expect(cliHasFlag('--no-such-flag-at-all', SOURCE_CLI)).toBe(false);
  });
});
