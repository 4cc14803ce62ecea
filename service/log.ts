// JSON logs (pino). Fields used across the service: workload, namespace, app, configs, strategy.
// Never log Secret data: the only config values that reach the process are hashed at once.
import { type Logger, pino } from 'pino';

export type { Logger };

export function createLogger(
  level: string,
  destination?: pino.DestinationStream,
  format: 'json' | 'text' = 'json',
): Logger {
  const out = format === 'text' ? (destination ?? pino.destination(1)) : destination;
  return pino(
    {
      level,
      base: { service: 'gitops-reloader' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    format === 'text' && out ? { write: (line: string) => out.write(logfmt(line)) } : out,
  );
}

/**
 * One JSON log line as a logfmt line (--log-format=text, Reloader's default format): `time`, `level`
 * and `msg` first, then the other fields in their order; a value with spaces, quotes or `=` is quoted,
 * an object or array is written as JSON.
 */
export function logfmt(line: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const { time, level, msg, ...rest } = entry;
  const parts: string[] = [];
  const add = (k: string, v: unknown) => {
    if (v === undefined) return;
    const text = typeof v === 'string' ? v : JSON.stringify(v);
    parts.push(`${k}=${/^[^\s"=\\]+$/.test(text) ? text : JSON.stringify(text)}`);
  };
  add('time', time);
  add('level', level);
  add('msg', msg);
  for (const [k, v] of Object.entries(rest)) add(k, v);
  return `${parts.join(' ')}\n`;
}

/** A logger that drops everything, for tests and tools that have nothing to say. */
export const silentLogger: Logger = pino({ level: 'silent' });
