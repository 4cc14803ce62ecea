import { describe, expect, it } from 'vitest';
import { type FileTiming, projectTotals, slowest, timingTable } from './timing-table.ts';

const f = (project: string, file: string, start: number, end: number, tests = 1): FileTiming => ({
  project,
  file,
  start,
  end,
  tests,
  state: 'passed',
});

describe('timing table', () => {
  const files = [
    f('unit', 'a.test.ts', 0, 2_000, 10),
    f('integration', 'b.test.ts', 1_000, 61_000, 3),
    f('integration', 'c.test.ts', 2_000, 32_000, 2),
    f('unit', 'd.test.ts', 2_000, 2_500, 4),
  ];

  it('orders files slowest first and keeps n', () => {
    expect(slowest(files, 2).map((x) => x.file)).toEqual(['b.test.ts', 'c.test.ts']);
  });

  it('sums each project and measures its wall span', () => {
    expect(projectTotals(files)).toEqual([
      { project: 'integration', files: 2, tests: 5, fileSeconds: 90, wallSeconds: 60 },
      { project: 'unit', files: 2, tests: 14, fileSeconds: 2.5, wallSeconds: 2.5 },
    ]);
  });

  it('prints a row per slow file, a line per project and the whole run', () => {
    const lines = timingTable(files, 3);
    expect(lines[0]).toBe("slowest 3 of 4 test files (seconds from the file's start to its end):");
    expect(lines[1]).toMatch(/^\s+60\.0\s+integration\s+b\.test\.ts\s+3 tests$/);
    expect(lines.some((l) => /^\s+unit\s+2 files\s+14 tests\s+2\.5 s summed\s+2\.5 s wall$/.test(l))).toBe(
      true,
    );
    expect(lines.at(-1)).toMatch(/^\s+all\s+4 files\s+61\.0 s wall$/);
  });

  it('marks a file that did not pass, and says when nothing ran', () => {
    expect(timingTable([{ ...f('unit', 'x.test.ts', 0, 1_000), state: 'failed' }]).join('\n')).toContain(
      '(failed)',
    );
    expect(timingTable([])).toEqual(['timings: no test file ran']);
  });
});
