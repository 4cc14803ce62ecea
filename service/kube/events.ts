// Records Kubernetes Events on workloads: Reloaded, ReloadSkipped, ReloadFailed,
// ReloadConfigInvalid, ReloadStalled, ReloadDeferred, ReloadHeld, ReloadHalted, ReloadAnnotationMapped. Repeats of the same event for the same object are
// suppressed for a while, so a bad annotation does not produce an Event per config change.
import os from 'node:os';
import type { Logger } from '../log.ts';
import type { CoreApi } from './api.ts';

export type EventReason =
  | 'Reloaded'
  | 'ReloadNotNeeded'
  | 'ReloadSkipped'
  | 'ReloadFailed'
  | 'ReloadConfigInvalid'
  | 'ReloadStalled'
  | 'ReloadPlanned'
  | 'ReloadNotified'
  /** Held until a maintenance window (gitops-reloader.io/restart-window) opens. */
  | 'ReloadDeferred'
  /** Held while a config the pods need (not optional) is missing (Warning). */
  | 'ReloadHeld'
  /** Progressive reloads: on a config, its change was halted by a failed wave; on a workload, its reload is held by it (Warning). */
  | 'ReloadHalted'
  /** Progressive reloads: on a config, its halted change was resumed (gitops-reloader.io/progressive-resume). */
  | 'ReloadResumed'
  /** On a config: it changed again and again within --flap-window (Warning, once per episode). */
  | 'ConfigFlapping'
  /** A Reloader annotation read with a meaning of our own (pause-period). */
  | 'ReloadAnnotationMapped'
  /** On our Lease: a new leader could not start acting (e.g. its caches did not sync) and gave it up. */
  | 'LeaseReleased';

export interface EventTarget {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

const API_VERSIONS: Record<string, string> = {
  Deployment: 'apps/v1',
  StatefulSet: 'apps/v1',
  DaemonSet: 'apps/v1',
  CronJob: 'batch/v1',
  Job: 'batch/v1',
  Rollout: 'argoproj.io/v1alpha1',
  Pod: 'v1',
};

export function apiVersionOf(kind: string): string {
  return API_VERSIONS[kind] ?? 'v1';
}

/** Stakater Reloader's reason for a reason of ours with the same meaning (--reloader-compat). */
export const RELOADER_REASONS: Readonly<Partial<Record<EventReason, string>>> = {
  ReloadFailed: 'ReloadFail',
};

export class EventRecorder {
  readonly #core: CoreApi;
  readonly #log: Logger;
  readonly #recent = new Map<string, number>();
  readonly #suppressMs: number;
  readonly #instance = os.hostname();

  /** Reason names changed on the way out (--reloader-compat: ReloadFailed is Reloader's ReloadFail). */
  readonly #renamed: Readonly<Partial<Record<EventReason, string>>>;

  constructor(core: CoreApi, log: Logger, suppressMs = 10 * 60_000, o: { reloaderReasons?: boolean } = {}) {
    this.#core = core;
    this.#log = log;
    this.#suppressMs = suppressMs;
    this.#renamed = o.reloaderReasons ? RELOADER_REASONS : {};
  }

  /** Emits an Event; never throws (a failed Event is logged, the reload goes on). */
  async emit(
    target: EventTarget,
    reason: EventReason,
    message: string,
    type: 'Normal' | 'Warning' = 'Normal',
  ) {
    const key = `${target.kind}/${target.namespace}/${target.name}/${reason}/${message}`;
    const now = Date.now();
    const last = this.#recent.get(key);
    if (last !== undefined && now - last < this.#suppressMs && reason !== 'Reloaded') return;
    this.#recent.set(key, now);
    if (this.#recent.size > 10_000) this.#prune(now);
    const ts = new Date(now);
    try {
      await this.#core.createNamespacedEvent({
        namespace: target.namespace,
        body: {
          metadata: { generateName: `${target.name}.`, namespace: target.namespace },
          involvedObject: {
            apiVersion: target.apiVersion,
            kind: target.kind,
            name: target.name,
            namespace: target.namespace,
            uid: target.uid,
          },
          reason: this.#renamed[reason] ?? reason,
          message: message.slice(0, 1024),
          type,
          source: { component: 'gitops-reloader' },
          reportingComponent: 'gitops-reloader.io/reloader',
          reportingInstance: this.#instance,
          firstTimestamp: ts,
          lastTimestamp: ts,
          count: 1,
        },
      });
    } catch (err) {
      this.#log.warn(
        {
          workload: `${target.kind}/${target.name}`,
          namespace: target.namespace,
          reason,
          err: (err as Error).message,
        },
        'could not record Event',
      );
    }
  }

  #prune(now: number) {
    for (const [k, t] of this.#recent) if (now - t >= this.#suppressMs) this.#recent.delete(k);
  }
}
