import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { withLock } from './lock.ts';

let base = '';
afterEach(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});

describe('withLock', () => {
  it('lets one holder in at a time, and releases the lock after an error', async () => {
    base = await mkdtemp(path.join(tmpdir(), 'lock-test-'));
    const dir = path.join(base, 'spoke.lock');
    let inside = 0;
    let most = 0;
    const yieldTurn = () => new Promise((r) => setImmediate(r));
    const holder = (i: number) =>
      withLock(dir, 10_000, async () => {
        inside++;
        most = Math.max(most, inside);
        for (let k = 0; k < 5; k++) await yieldTurn();
        inside--;
        return i;
      });
    expect(await Promise.all([1, 2, 3, 4].map(holder))).toEqual([1, 2, 3, 4]);
    expect(most).toBe(1);
    await expect(withLock(dir, 1_000, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(withLock(dir, 1_000, async () => 'free again')).resolves.toBe('free again');
  });

  it('takes over a lock whose owner is gone', async () => {
    base = await mkdtemp(path.join(tmpdir(), 'lock-test-'));
    const dir = path.join(base, 'spoke.lock');
    await mkdir(dir);
    await writeFile(path.join(dir, 'pid'), '999999999'); // beyond pid_max: no such process
    await expect(withLock(dir, 1_000, async () => 'taken')).resolves.toBe('taken');
  });

  it('gives up at its deadline while a live owner holds the lock', async () => {
    base = await mkdtemp(path.join(tmpdir(), 'lock-test-'));
    const dir = path.join(base, 'spoke.lock');
    await mkdir(dir);
    await writeFile(path.join(dir, 'pid'), String(process.pid));
    await expect(withLock(dir, 500, async () => 'never')).rejects.toThrow(/timed out/);
  });
});
