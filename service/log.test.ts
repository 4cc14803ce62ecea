import { describe, expect, it } from 'vitest';
import { createLogger, logfmt } from './log.ts';

describe("--log-format=text (logfmt, Reloader's default format)", () => {
  it('writes time, level and msg first, quotes values that need it, and JSON-encodes objects', () => {
    const lines: string[] = [];
    const log = createLogger('info', { write: (l: string) => lines.push(l) }, 'text');
    log.info({ workload: 'Deployment/web', configs: ['ConfigMap/app'], n: 2 }, 'reload started');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^time=\d{4}-\d\d-\d\dT[\d:.]+Z level=info msg="reload started" service=gitops-reloader workload=Deployment\/web configs="\[\\"ConfigMap\/app\\"\]" n=2\n$/,
    );
  });

  it('keeps JSON lines by default', () => {
    const lines: string[] = [];
    createLogger('info', { write: (l: string) => lines.push(l) }).info({ a: 1 }, 'hello');
    expect(JSON.parse(lines[0] as string)).toMatchObject({ level: 'info', msg: 'hello', a: 1 });
  });

  it('passes a line that is not JSON through unchanged', () => {
    expect(logfmt('plain text\n')).toBe('plain text\n');
  });
});
