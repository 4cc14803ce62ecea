// The import graph points down: no cycles anywhere in service/ and git/, the pure core imports
// nothing above it, and configuration imports no feature module (CONVENTIONS.md, "Habits").
// Type-only imports count: a cycle through types is still two modules that cannot be read apart.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sourceFiles } from '../test/support/source-files.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** file (relative to the repo) → the repo files it imports (relative imports only). */
function importGraph(dirs: readonly string[]): Map<string, string[]> {
  const files = dirs.flatMap((d) => sourceFiles(join(root, d)));
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  const spec = /(?:^|\n)\s*(?:import|export)\b[^;'"]*?\bfrom\s+['"](\.{1,2}\/[^'"]+)['"]/g;
  for (const f of files) {
    const deps = [...readFileSync(f, 'utf8').matchAll(spec)]
      .map((m) => resolve(dirname(f), m[1] as string))
      .filter((d) => known.has(d))
      .map((d) => relative(root, d));
    graph.set(relative(root, f), [...new Set(deps)]);
  }
  return graph;
}

/** Strongly connected components with more than one member (or a self-import): the cycles. */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
      }
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('import graph', () => {
  const graph = importGraph(['service', 'git']);

  it('reads the sources it checks', () => {
    // Guards the checks below against passing on an empty graph.
    expect(graph.get('service/reconciler.ts')).toContain('service/core/batcher.ts');
    expect(graph.get('service/config/config.ts')).toContain('service/config/flags.ts');
  });

  it('finds a cycle when there is one', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    expect(cycles(g)).toEqual([['a', 'b', 'c']]);
  });

  it('has no import cycles in service/ and git/', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('keeps the pure core free of imports from above it', () => {
    const up = [...graph]
      .filter(([f]) => f.startsWith('service/core/'))
      .flatMap(([f, deps]) => deps.filter((d) => !d.startsWith('service/core/')).map((d) => `${f} -> ${d}`));
    expect(up).toEqual([]);
  });

  it('keeps configuration free of feature modules', () => {
    const up = [...graph]
      .filter(([f]) => f.startsWith('service/config/'))
      .flatMap(([f, deps]) =>
        deps.filter((d) => !/^service\/(config|core)\//.test(d)).map((d) => `${f} -> ${d}`),
      );
    expect(up).toEqual([]);
  });
});
