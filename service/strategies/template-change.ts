// Whether a workload's pod template changed after a config change, in the API server's own order
// (resourceVersion). A template rolled out after the change starts pods that already read it, so a
// restart must count them as new: replacing them again would recycle pods twice (invariant I3).
//
// The service's watched state says so at once when it has already seen the later template, but a
// watch can lag behind the sync (a loaded machine, a busy API server). So the restart's own live view
// of the workload is the truth about the template now, and when it differs from the watched one the
// API server is asked what the template was at the change itself.

import { compareResourceVersions } from '../core/records.ts';
import type { WorkloadKind } from '../core/types.ts';
import { templateHashOf } from '../kube/to-record.ts';
import type { RawObject } from '../kube/watch-logic.ts';

export interface TemplateChangeInput {
  kind: WorkloadKind;
  /** The newest resourceVersion among the changed configs; '0' when unknown (nothing to compare). */
  changeRV: string;
  /** What the service's watch last showed of the workload, if anything. */
  watched(): { templateHash: string; templateRV: string } | undefined;
  /** The workload exactly at a past resourceVersion (undefined if it did not exist); may throw (410). */
  readAt(resourceVersion: string): Promise<RawObject | undefined>;
  /** Told when the past could not be read, so the answer fell back to "not changed". */
  onUnknown?(why: string): void;
}

/**
 * Makes the check a restart calls with its live view of the workload. "Not changed" is the answer
 * whenever the order cannot be known: a second restart of fresh pods costs a rollout, while skipping
 * pods that predate the change would leave them on the old config.
 */
export function templateChangeCheck(input: TemplateChangeInput): (live: RawObject) => Promise<boolean> {
  const answers = new Map<string, Promise<boolean>>();
  return async (live) => {
    if (input.changeRV === '0') return false;
    const watched = input.watched();
    if (watched && (compareResourceVersions(watched.templateRV, input.changeRV) ?? -1) > 0) return true;
    const liveHash = templateHashOf(input.kind, live);
    // The watch shows the live template, and its last change was not after the config change.
    if (watched?.templateHash === liveHash) return false;
    let answer = answers.get(liveHash);
    if (!answer) {
      answer = input.readAt(input.changeRV).then(
        (then) => then !== undefined && templateHashOf(input.kind, then) !== liveHash,
        (err: Error) => {
          input.onUnknown?.(err.message);
          return false;
        },
      );
      answers.set(liveHash, answer);
    }
    return answer;
  };
}
