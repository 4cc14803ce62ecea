// A cross-process lock on one name: a directory made with mkdir (atomic), holding the owner's pid.
// A lock whose owner is gone is taken over, so a killed test run does not block the next one.
import { readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function owner(dir: string): number | undefined {
  try {
    return Number(readFileSync(path.join(dir, 'pid'), 'utf8'));
  } catch {
    return undefined;
  }
}

export async function withLock<T>(dir: string, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  await mkdir(path.dirname(dir), { recursive: true });
  for (;;) {
    try {
      await mkdir(dir);
      await writeFile(path.join(dir, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = owner(dir);
      // No pid yet: the owner is between mkdir and writeFile; wait for it.
      if (pid !== undefined && !alive(pid)) {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${dir} (pid ${pid})`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
