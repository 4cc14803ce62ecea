// The TypeScript sources of the repository (not its tests), for the tests that read the code itself:
// the import graph, and the one URL parser.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Every `.ts` file under `dir` that is not a `.test.ts`, recursively. */
export function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (p.endsWith('.ts') && !p.endsWith('.test.ts')) out.push(p);
  }
  return out;
}
