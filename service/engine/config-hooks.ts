// What the reconciler does with a config change besides batching it: the progressive reloads learn
// the config's new content (engine/progressive.ts) and a resume asked for on it, and a config that
// keeps changing is reported as flapping (core/flap.ts), once per episode, naming its writers.

import { KEYS } from '../core/annotations.ts';
import { realTimers } from '../core/batcher.ts';
import { Flaps } from '../core/flap.ts';
import type { ConfigRecord } from '../core/records.ts';
import { configId } from '../core/types.ts';
import { apiVersionOf } from '../kube/events.ts';
import type { ReconcilerDeps } from './deps.ts';
import type { Progressive } from './progressive.ts';
import { display } from './report.ts';

export class ConfigHooks {
  readonly #d: ReconcilerDeps;
  readonly #progressive: Progressive | undefined;
  readonly #flaps: Flaps;

  constructor(d: ReconcilerDeps, progressive: Progressive | undefined) {
    this.#d = d;
    this.#progressive = progressive;
    this.#flaps = new Flaps(d.cfg.flap);
  }

  /** A config in scope was added, changed or deleted; `metadataOnly`: its data did not change. */
  changed(old: ConfigRecord | undefined, now: ConfigRecord | undefined, metadataOnly: boolean): void {
    const rec = (now ?? old) as ConfigRecord;
    const id = configId(rec.ref);
    if (!metadataOnly) this.#progressive?.configChanged(id, now?.digest.all);
    const resume = now?.annotations[KEYS.progressiveResume];
    if (now && resume && resume !== old?.annotations[KEYS.progressiveResume]) this.#progressive?.resume(now);
    if (!metadataOnly && old && now) this.#flap(id, now);
  }

  #flap(id: string, now: ConfigRecord): void {
    const { cfg, log, events, metrics } = this.#d;
    const f = this.#flaps.observe(id, (this.#d.timers ?? realTimers).now(), now.writer);
    if (!f) return;
    metrics?.configFlapped();
    const writers = f.writers.length > 0 ? f.writers.join(', ') : 'unknown (no managedFields)';
    log.warn(
      { config: display(id), namespace: now.ref.namespace, changes: f.changes, writers: f.writers },
      'config flapping',
    );
    const r = now.ref;
    void events.emit(
      { apiVersion: apiVersionOf(r.kind), kind: r.kind, namespace: r.namespace, name: r.name, uid: now.uid },
      'ConfigFlapping',
      `changed ${f.changes} times within ${cfg.flap.windowMs / 1000}s, written by ${writers}; ` +
        `its workloads restart at most once per --min-reload-interval (${cfg.minReloadIntervalMs / 1000}s), the newest content wins`,
      'Warning',
    );
  }
}
