import { describe, expect, it } from 'vitest';
import { BEGIN, END, type Results, splice, table } from './table.ts';

const row = (id: string, expected: 'reload' | 'none', observed: Results['rows'][number]['observed']) => ({
  id,
  title: `scenario ${id}`,
  from: `e2e/${id}_test.go: it ${id}`,
  expected,
  observed,
});

describe('the compatibility table', () => {
  it('shows each tool per scenario, marks outcomes against the expectation, and flags an unexplained difference', () => {
    const ours: Results = {
      subject: 'gitops-reloader',
      rows: [row('a', 'reload', 'reloaded'), row('b', 'none', 'reloaded')],
    };
    const peer: Results = {
      subject: 'reloader',
      rows: [row('a', 'reload', 'reloaded'), row('b', 'none', 'not reloaded')],
    };
    const t = table([ours, peer], '2026-12-06');
    expect(t).toContain(
      "| scenario | Reloader's e2e | expected | reloader | gitops-reloader | why they differ |",
    );
    expect(t).toContain('| scenario a | e2e/a_test.go: it a | reload | reloaded ✓ | reloaded ✓ |  |');
    expect(t).toContain(
      '| scenario b | e2e/b_test.go: it b | none | not reloaded ✓ | reloaded ✗ | unexplained: a bug to fix |',
    );
  });

  it('replaces only the text between its markers, and appends them when absent', () => {
    const doc = `# Doc\n\n${BEGIN}\nold\n${END}\n\nafter\n`;
    expect(splice(doc, 'new')).toBe(`# Doc\n\n${BEGIN}\nnew\n${END}\n\nafter\n`);
    expect(splice('# Doc\n', 'new')).toBe(`# Doc\n\n${BEGIN}\nnew\n${END}\n`);
  });
});
