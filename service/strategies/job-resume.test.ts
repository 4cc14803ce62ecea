import { describe, expect, it } from 'vitest';
import type { BatchApi } from '../kube/api.ts';
import type { JobSpecStore } from '../kube/job-spec-store.ts';
import { silentLogger } from '../log.ts';
import { JobResumer, type ResumeHooks } from './job-resume.ts';

describe('JobResumer', () => {
  it("runs again for a new term's request made while the ended term's run is still going", async () => {
    let release!: () => void;
    const lists: number[] = [];
    const store = {
      async list() {
        lists.push(lists.length);
        // The first run is slow: the next request arrives while it reads.
        if (lists.length === 1) await new Promise<void>((r) => (release = r));
        return [];
      },
    } as unknown as JobSpecStore;
    const resumer = new JobResumer({
      batch: {} as BatchApi,
      store,
      events: { emit: async () => {} },
      log: silentLogger,
    });
    const hooks = (signal: AbortSignal): ResumeHooks => ({ signal, busy: () => false, pending: () => false });
    const ended = new AbortController();
    const first = resumer.run(hooks(ended.signal));
    await Promise.resolve();
    const next = resumer.run(hooks(new AbortController().signal));
    ended.abort(); // the first term ends while its run reads
    release();
    await Promise.all([first, next]);
    expect(lists).toHaveLength(2);
  });
});
