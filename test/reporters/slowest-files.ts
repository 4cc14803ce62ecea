// A vitest reporter that ends `npm test` with the time table (timing-table.ts): the 25 slowest test
// files and the seconds of each project. It also writes the records to .test-timings.json
// (git-ignored), which docs/CONTRIBUTING.md uses to compare runs.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';
import { type FileTiming, timingTable } from './timing-table.ts';

export default class SlowestFiles implements Reporter {
  readonly #starts = new Map<string, number>();
  readonly #files: FileTiming[] = [];
  readonly #root = path.resolve(import.meta.dirname, '..', '..');

  onTestModuleStart(m: TestModule): void {
    this.#starts.set(`${m.project.name}\0${m.moduleId}`, Date.now());
  }

  onTestModuleEnd(m: TestModule): void {
    const end = Date.now();
    const start = this.#starts.get(`${m.project.name}\0${m.moduleId}`) ?? end;
    this.#files.push({
      project: m.project.name,
      file: path.relative(this.#root, m.moduleId),
      start,
      end,
      tests: [...m.children.allTests()].length,
      state: m.state(),
    });
  }

  onTestRunEnd(): void {
    console.log(`\n${timingTable(this.#files).join('\n')}`);
    try {
      writeFileSync(path.join(this.#root, '.test-timings.json'), `${JSON.stringify(this.#files, null, 1)}\n`);
    } catch {
      // The table above is the result; the file is a convenience.
    }
  }
}
