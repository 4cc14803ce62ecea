// What the story asks of a GitOps engine (Argo CD or Flux): to deploy the app's repository, to apply
// a new commit now, and the words the story uses for it. Everything else is the same for both.
import type { AppsV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { ClusterState, UpOptions } from '../../test/cluster/control-plane.ts';

export interface Clients {
  core: CoreV1Api;
  apps: AppsV1Api;
  custom: CustomObjectsApi;
}

export interface Engine {
  /** As the story names it: `Argo CD`, `Flux`. */
  name: string;
  /** Step 1's title, after "1/6 ". */
  environment: string;
  /** The parts of the environment the engine runs on (test/cluster `up` options). */
  needs: UpOptions;
  words: {
    /** "let <name> …" in step 2: `sync it`. */
    deployIt: string;
    /** "; <name> …" in step 4: `syncs it`. */
    appliesIt: string;
    /** Why the old pods still serve when the engine is done: `changes held until the sync ended`. */
    heldUntil: string;
    /** What one reload was for: `Argo CD sync`. */
    oneChange: string;
  };
  /** The engine in the running environment; throws when the environment lacks it. */
  open(state: ClusterState, clients: Clients): EngineRun;
}

export interface EngineRun {
  /** The service's flags that point it at this engine. */
  serviceFlags: string[];
  /** Deletes the engine's objects an earlier run left behind. */
  clearLeftovers(): Promise<void>;
  /** Deploys the app from `repoUrl` (undone at clean-up); resolves once `sha` is applied, with e.g. `Argo CD synced abc1234: Synced, Healthy`. */
  deploy(repoUrl: string, sha: string): Promise<string>;
  /** After a push of `sha`: asks the engine to fetch it now; resolves when its apply ended, with e.g. `Argo CD sync <start> → <end>: Succeeded`. */
  apply(sha: string): Promise<string>;
  /** Asks the engine to look again after the reload; resolves once it still has `sha` applied, with its state, e.g. `Synced, Healthy`. */
  settled(sha: string): Promise<string>;
}
