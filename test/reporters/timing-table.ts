// The time table `npm test` ends with: the slowest test files and, per project, how many files ran,
// their summed seconds and the project's wall-clock span. Pure: the reporter (slowest-files.ts)
// feeds it one record per finished file.

export interface FileTiming {
  project: string;
  /** Path relative to the repository. */
  file: string;
  /** When the file started and ended (ms since the epoch), as the runner saw it. */
  start: number;
  end: number;
  tests: number;
  state: string;
}

export interface ProjectTotal {
  project: string;
  files: number;
  tests: number;
  /** Summed seconds of its files (what one worker would take, one after another). */
  fileSeconds: number;
  /** First start to last end. */
  wallSeconds: number;
}

const seconds = (ms: number) => ms / 1000;

export function projectTotals(files: readonly FileTiming[]): ProjectTotal[] {
  const by = new Map<string, FileTiming[]>();
  for (const f of files) by.set(f.project, [...(by.get(f.project) ?? []), f]);
  return [...by.entries()]
    .map(([project, fs]) => ({
      project,
      files: fs.length,
      tests: fs.reduce((n, f) => n + f.tests, 0),
      fileSeconds: seconds(fs.reduce((n, f) => n + (f.end - f.start), 0)),
      wallSeconds: seconds(Math.max(...fs.map((f) => f.end)) - Math.min(...fs.map((f) => f.start))),
    }))
    .sort((a, b) => a.project.localeCompare(b.project));
}

export function slowest(files: readonly FileTiming[], n: number): FileTiming[] {
  return [...files]
    .sort((a, b) => b.end - b.start - (a.end - a.start) || a.file.localeCompare(b.file))
    .slice(0, n);
}

/** The table as plain text lines. */
export function timingTable(files: readonly FileTiming[], n = 25): string[] {
  if (files.length === 0) return ['timings: no test file ran'];
  const rows = slowest(files, n);
  const width = Math.max(...rows.map((r) => r.file.length), 4);
  const pw = Math.max(...files.map((f) => f.project.length), 7);
  const lines = [
    `slowest ${rows.length} of ${files.length} test files (seconds from the file's start to its end):`,
  ];
  for (const r of rows) {
    lines.push(
      `  ${seconds(r.end - r.start)
        .toFixed(1)
        .padStart(
          7,
        )}  ${r.project.padEnd(pw)}  ${r.file.padEnd(width)}  ${r.tests} tests${r.state === 'passed' ? '' : ` (${r.state})`}`,
    );
  }
  lines.push(
    'per project (files, tests, summed file seconds, wall seconds from its first start to its last end):',
  );
  for (const t of projectTotals(files)) {
    lines.push(
      `  ${t.project.padEnd(pw)}  ${String(t.files).padStart(4)} files  ${String(t.tests).padStart(5)} tests  ${t.fileSeconds
        .toFixed(1)
        .padStart(8)} s summed  ${t.wallSeconds.toFixed(1).padStart(7)} s wall`,
    );
  }
  const all = seconds(Math.max(...files.map((f) => f.end)) - Math.min(...files.map((f) => f.start)));
  lines.push(
    `  ${'all'.padEnd(pw)}  ${String(files.length).padStart(4)} files  ${' '.repeat(12)}  ${' '.repeat(17)} ${all.toFixed(1).padStart(7)} s wall`,
  );
  return lines;
}
