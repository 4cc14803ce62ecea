// What the demo undoes on exit, failure or Ctrl-C: each step registers its undo, run in reverse order.
import { say } from './output.ts';

const cleanups: Array<() => Promise<unknown>> = [];
let cleaning: Promise<void> | undefined;

/** Registers an undo; undos run last-registered first, and one that fails does not stop the rest. */
export function onCleanUp(undo: () => Promise<unknown>): void {
  cleanups.push(undo);
}

function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  })();
  return cleaning;
}

/** Runs `main`, cleans up after it (or on SIGINT/SIGTERM) and exits 0, 1 on failure or 130 on a signal. */
export function runCleaningUp(main: () => Promise<void>): void {
  let interrupted = false;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      interrupted = true;
      say(`\n${sig}: cleaning up…`);
      void cleanUp().then(() => process.exit(130));
    });
  }
  main()
    .then(() => cleanUp())
    .then(
      () => process.exit(0),
      async (err: unknown) => {
        // Interrupted: what failed is what the clean-up stopped (the service); the signal's exit stands.
        if (interrupted) return;
        process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
        await cleanUp();
        process.exit(1);
      },
    );
}
