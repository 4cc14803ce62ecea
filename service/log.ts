// JSON logs (pino). Fields used across the service: workload, namespace, app, configs, strategy.
// Never log Secret data: the only config values that reach the process are hashed at once.
import { type Logger, pino } from 'pino';

export type { Logger };

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'gitops-reloader' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}

/** A logger that drops everything, for tests and tools that have nothing to say. */
export const silentLogger: Logger = pino({ level: 'silent' });
