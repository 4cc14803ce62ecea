import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.ts';
import type { CoreApi } from './api.ts';
import { EventRecorder } from './events.ts';

function recorder(o: { reloaderReasons?: boolean } = {}) {
  const reasons: string[] = [];
  const core = {
    async createNamespacedEvent({ body }: { body: { reason: string } }) {
      reasons.push(body.reason);
      return body;
    },
  } as unknown as CoreApi;
  return { reasons, events: new EventRecorder(core, silentLogger, 0, o) };
}

const web = { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'shop', name: 'web' };

describe('Event reasons', () => {
  it("are ours by default, and Reloader's ReloadFail for a failure with --reloader-compat", async () => {
    const ours = recorder();
    await ours.events.emit(web, 'ReloadFailed', 'boom', 'Warning');
    await ours.events.emit(web, 'Reloaded', 'ok');
    expect(ours.reasons).toEqual(['ReloadFailed', 'Reloaded']);
    const compat = recorder({ reloaderReasons: true });
    await compat.events.emit(web, 'ReloadFailed', 'boom', 'Warning');
    await compat.events.emit(web, 'Reloaded', 'ok');
    expect(compat.reasons).toEqual(['ReloadFail', 'Reloaded']);
  });
});
