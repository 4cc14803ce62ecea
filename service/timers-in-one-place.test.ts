// Timers after the batch are armed in one module only: the waiting room (engine/waiting-room.ts,
// docs/adr/0044). Every other file of service/ that arms a timer is listed here with why it may; a new
// one fails this test until it is moved into the room or added here with its reason (issue 34).
import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sourceFiles } from '../test/support/source-files.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const ALLOWED: Record<string, string> = {
  'service/engine/waiting-room.ts': 'the one scheduler after the batch',
  'service/core/batcher.ts': 'before the batch: debounce (and the real timers every module is given)',
  'service/argocd/gate.ts': 'before the batch: holds changes until an Argo CD sync ends',
  'service/flux/gate.ts': 'before the batch: holds changes until a Flux applier is Ready',
  'service/core/work-queue.ts': 'the queue keeps fairness and the minimum interval',
  'service/core/token-bucket.ts': 'the API write rate',
  'service/strategies/restart-budget.ts': 'inside a running restart: the slot for one pod',
  'service/core/progress-deadline.ts': 'inside a running reload: --reload-deadline without progress',
  'service/strategies/restart-session.ts': 'inside a running restart: polls',
  'service/strategies/types.ts': 'inside a running strategy call: a sleep that aborts',
  'service/kube/live-view.ts': 'adapter: watches',
  'service/kube/watch.ts': 'adapter: watches',
  'service/kube/watch-http.ts': 'adapter: watches',
  'service/kube/h2-sessions.ts': 'adapter: HTTP/2 connections (connect timeout, ping, idle close)',
  'service/kube/leader.ts': 'adapter: leader election',
  'service/http.ts': 'adapter: the HTTP server',
  'service/hub/hub.ts': 'hub: applying a cluster',
  'service/hub/shares.ts': 'hub: shares',
  'service/hub/seat.ts': 'hub: seats',
};

describe('timers', () => {
  it('are armed after the batch in the waiting room only; every other place is listed with its reason', () => {
    const arming = sourceFiles(resolve(root, 'service'))
      .filter((f) => /\btimers\.set\(|\bsetTimeout\(/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(root, f))
      .sort();
    expect(arming).toEqual(Object.keys(ALLOWED).sort());
  });
});
