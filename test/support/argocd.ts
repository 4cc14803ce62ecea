// The one harness for suites that run against the real Argo CD started by test/cluster (see
// test/cluster/argocd.ts): a git repository on the loopback git server that a test commits to, and an
// Application in Argo CD's namespace that syncs it into the test's namespace. What Argo CD did is read
// from the Application's status and watched, never written by the test.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import { inject, type TestContext } from 'vitest';
import { stringify } from 'yaml';
import type { ArgoCdEndpoints } from '../cluster/argocd.ts';
import { git } from './git-server.ts';
import type { Kube } from './kube.ts';
import { hashKeyFile, type RunningService, serviceArgs, startService } from './service.ts';
import { TEST_TIMINGS } from './timings.ts';
import { pastTheSecondOf, pending, waitFor } from './wait-for.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    argocd: ArgoCdEndpoints | undefined;
  }
}

export function argocdEndpoints(): ArgoCdEndpoints {
  const e = inject('argocd');
  if (!e) {
    throw new Error(
      'this suite needs the real Argo CD of test/cluster; the control plane in use has none (TEST_KUBECONFIG clusters need Argo CD installed and are not supported by these suites)',
    );
  }
  return e;
}

/** A manifest as it sits in git. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  [k: string]: unknown;
}

/** The file a manifest is kept in: one file per object, so a commit can change any subset. */
export function fileOf(m: Manifest, dir = 'manifests'): string {
  return `${dir}/${m.kind.toLowerCase()}-${m.metadata.name}.yaml`;
}

export function toFiles(manifests: readonly Manifest[], dir = 'manifests'): Record<string, string> {
  return Object.fromEntries(manifests.map((m) => [fileOf(m, dir), stringify(m)]));
}

/** A repository on the cluster's git server. */
export class GitRepo {
  readonly name: string;
  readonly url: string;
  readonly bare: string;

  private constructor(name: string, url: string, bare: string) {
    this.name = name;
    this.url = url;
    this.bare = bare;
  }

  /** Creates `<name>.git` with one commit holding `files` on main. */
  static async create(name: string, files: Record<string, string>): Promise<GitRepo> {
    const e = argocdEndpoints();
    const bare = path.join(e.gitRoot, `${name}.git`);
    await rm(bare, { recursive: true, force: true });
    await git(e.gitRoot, 'init', '--quiet', '--bare', '--initial-branch=main', bare);
    // Let pushes through http-backend update the branch (receive-pack runs as the daemon's user).
    await git(bare, 'config', 'http.receivepack', 'true');
    const repo = new GitRepo(name, `${e.git}/${name}.git`, bare);
    await repo.commit(files, 'Initial manifests');
    return repo;
  }

  /** Commits `files` (null deletes a file) to main, as a person pushing would; returns the sha. */
  async commit(files: Record<string, string | null>, message: string): Promise<string> {
    const work = await mkdtemp(path.join(tmpdir(), 'gr-argocd-repo-'));
    try {
      const head = (await git(this.bare, 'for-each-ref', 'refs/heads/main')).trim();
      if (head) await git(work, 'clone', '--quiet', '--branch', 'main', this.bare, '.');
      else await git(work, 'init', '--quiet', '--initial-branch=main');
      for (const [name, text] of Object.entries(files)) {
        const full = path.join(work, name);
        if (text === null) {
          await rm(full, { force: true });
          continue;
        }
        await mkdir(path.dirname(full), { recursive: true });
        await writeFile(full, text);
      }
      await git(work, 'add', '-A');
      await git(work, 'commit', '--quiet', '--allow-empty', '-m', message);
      await git(work, 'push', '--quiet', this.bare, 'HEAD:refs/heads/main');
      return (await git(work, 'rev-parse', 'HEAD')).trim();
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  async head(): Promise<string> {
    return (await git(this.bare, 'rev-parse', 'refs/heads/main')).trim();
  }

  async log(): Promise<Array<{ sha: string; subject: string; author: string }>> {
    const out = await git(this.bare, 'log', '--format=%H%x00%s%x00%an <%ae>', 'refs/heads/main');
    return out
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [sha = '', subject = '', author = ''] = l.split('\0');
        return { sha, subject, author };
      });
  }

  async show(rev: string, file: string): Promise<string> {
    return git(this.bare, 'show', `${rev}:${file}`);
  }
}

/** The parts of an Application's status the suites read. */
export interface AppStatus {
  /** How the repo-server rendered the source: Directory, Helm, Kustomize, Plugin. */
  sourceType?: string;
  sync?: { status?: string; revision?: string };
  health?: { status?: string };
  operationState?: {
    phase?: string;
    startedAt?: string;
    finishedAt?: string;
    message?: string;
    retryCount?: number;
    syncResult?: {
      revision?: string;
      resources?: Array<{
        kind: string;
        name: string;
        hookPhase?: string;
        syncPhase?: string;
        message?: string;
      }>;
    };
  };
  resources?: Array<{
    kind: string;
    name: string;
    namespace?: string;
    status?: string;
    health?: { status?: string };
  }>;
  reconciledAt?: string;
}

export interface Application {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    annotations?: Record<string, string>;
    resourceVersion?: string;
  };
  spec: Record<string, unknown>;
  status?: AppStatus;
  operation?: unknown;
}

export interface AppOptions {
  name: string;
  repo: GitRepo;
  path?: string;
  /** Destination namespace (the test's). */
  destination: string;
  /**
   * Destination cluster by name, as registered in Argo CD (`spec.destination.name`, e.g. a spoke of
   * test/support/spokes.ts); default the cluster Argo CD runs in (`server: https://kubernetes.default.svc`).
   */
  cluster?: string;
  /** Automated sync with prune and selfHeal (default true). */
  automated?: boolean;
  syncOptions?: string[];
  annotations?: Record<string, string>;
  /** `spec.syncPolicy.retry`. Argo CD retries a failed automated sync 5 times by default. */
  retry?: { limit: number; backoff?: { duration?: string; factor?: number; maxDuration?: string } };
  /** Extra `spec.source` fields (plugin, helm, …). */
  source?: Record<string, unknown>;
  project?: string;
}

/** One moment of an Application as the watch saw it. */
export interface AppMoment {
  at: number;
  sync?: string;
  health?: string;
  phase?: string;
  revision?: string;
}

const coords = (namespace: string) => ({
  group: 'argoproj.io',
  version: 'v1alpha1',
  namespace,
  plural: 'applications',
});

/** An Application of the real Argo CD. */
export class ArgoApp {
  readonly kube: Kube;
  readonly name: string;
  readonly namespace: string;
  /** Every state the watch saw, oldest first (see watch()). */
  readonly history: AppMoment[] = [];
  #abort: AbortController | undefined;

  private constructor(kube: Kube, name: string, namespace: string) {
    this.kube = kube;
    this.name = name;
    this.namespace = namespace;
  }

  static async create(kube: Kube, o: AppOptions): Promise<ArgoApp> {
    const e = argocdEndpoints();
    const body: Application = {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      metadata: {
        name: o.name,
        namespace: e.namespace,
        ...(o.annotations ? { annotations: o.annotations } : {}),
      },
      spec: {
        project: o.project ?? 'default',
        source: { repoURL: o.repo.url, targetRevision: 'main', path: o.path ?? 'manifests', ...o.source },
        destination: {
          ...(o.cluster ? { name: o.cluster } : { server: 'https://kubernetes.default.svc' }),
          namespace: o.destination,
        },
        syncPolicy: {
          ...(o.automated === false ? {} : { automated: { prune: true, selfHeal: true } }),
          ...(o.syncOptions ? { syncOptions: o.syncOptions } : {}),
          ...(o.retry ? { retry: o.retry } : {}),
        },
      },
    };
    await kube.custom.createNamespacedCustomObject({ ...coords(e.namespace), body });
    const app = new ArgoApp(kube, o.name, e.namespace);
    await app.watch();
    return app;
  }

  async read(): Promise<Application> {
    return (await this.kube.custom.getNamespacedCustomObject({
      ...coords(this.namespace),
      name: this.name,
    })) as Application;
  }

  /** Asks Argo CD to compare with git now (a hard refresh, as the UI's button: no cached revision). */
  async refresh(): Promise<void> {
    await this.kube.custom.patchNamespacedCustomObject(
      {
        ...coords(this.namespace),
        name: this.name,
        body: { metadata: { annotations: { 'argocd.argoproj.io/refresh': 'hard' } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  /**
   * One more comparison by Argo CD, waited for: asks for a hard refresh and waits until the
   * application controller has done it. It removes the refresh annotation in the same status patch
   * that records the comparison (controller/appcontroller.go, persistAppStatus) and stamps
   * status.reconciledAt. The request is made in a later second than the last reconciledAt (whole
   * seconds), so the comparison's status differs and is written. Returns the app as compared.
   */
  async compared(timeout = 120_000): Promise<Application> {
    const last = Date.parse((await this.read()).status?.reconciledAt ?? '');
    if (Number.isFinite(last)) await pastTheSecondOf(last);
    const asked = Math.floor(Date.now() / 1000) * 1000;
    await this.refresh();
    return this.waitFor(
      `${this.name} compared again after a hard refresh`,
      (a) =>
        a.metadata.annotations?.['argocd.argoproj.io/refresh'] === undefined &&
        Date.parse(a.status?.reconciledAt ?? '') >= asked,
      timeout,
    );
  }

  /**
   * Argo CD compares the app again `times` times (hard refreshes, each waited for: compared()) and
   * finds it Synced and Healthy each time, and the watch saw no other state since `since` (ms).
   * What a window of refreshes showed, as a fixed number of Argo CD's own decisions.
   */
  async expectStaysSyncedAndHealthy(since: number, times = 2): Promise<void> {
    for (let i = 1; i <= times; i++) {
      const a = await this.compared();
      const seen = { sync: a.status?.sync?.status, health: a.status?.health?.status };
      if (seen.sync !== 'Synced' || seen.health !== 'Healthy')
        throw new Error(`comparison ${i} of ${times} found the app ${JSON.stringify(summary(a))}`);
    }
    const bad = this.departuresSince(since);
    if (bad.length > 0) throw new Error(`the app left Synced/Healthy: ${JSON.stringify(bad)}`);
  }

  /** Waits until Argo CD has synced `revision` and the app is Synced and Healthy. */
  async waitSynced(revision: string, timeout = 120_000): Promise<Application> {
    return this.waitFor(
      `${this.name} Synced and Healthy at ${revision.slice(0, 8)}`,
      (a) => {
        const s = a.status;
        return (
          s?.sync?.status === 'Synced' &&
          s.sync.revision === revision &&
          s.health?.status === 'Healthy' &&
          s.operationState?.phase === 'Succeeded' &&
          s.operationState.syncResult?.revision === revision
        );
      },
      timeout,
    );
  }

  /** Waits until an operation on `revision` ended in `phase`. */
  async waitOperation(revision: string, phase: string, timeout = 120_000): Promise<Application> {
    return this.waitFor(
      `${this.name} operation on ${revision.slice(0, 8)} ${phase}`,
      (a) =>
        a.status?.operationState?.phase === phase &&
        a.status.operationState.syncResult?.revision === revision &&
        !a.operation,
      timeout,
    );
  }

  async waitFor(what: string, ok: (a: Application) => boolean, timeout = 120_000): Promise<Application> {
    return waitFor(
      async () => {
        const a = await this.read();
        return ok(a) ? a : pending(summary(a));
      },
      { describe: what, timeout, interval: 200 },
    );
  }

  /** Commits, then refreshes so Argo CD sees the commit at once; returns the new revision. */
  async commit(repo: GitRepo, files: Record<string, string | null>, message: string): Promise<string> {
    const sha = await repo.commit(files, message);
    await this.refresh();
    return sha;
  }

  /** Follows the Application through a real watch and records every state in `history`. */
  async watch(): Promise<void> {
    if (this.#abort) return;
    this.#abort = await new Watch(this.kube.kc).watch(
      `/apis/argoproj.io/v1alpha1/namespaces/${this.namespace}/applications`,
      { fieldSelector: `metadata.name=${this.name}` },
      (_type: string, a: Application) => {
        const s = a.status;
        this.history.push({
          at: Date.now(),
          ...(s?.sync?.status ? { sync: s.sync.status } : {}),
          ...(s?.health?.status ? { health: s.health.status } : {}),
          ...(s?.operationState?.phase ? { phase: s.operationState.phase } : {}),
          ...(s?.sync?.revision ? { revision: s.sync.revision } : {}),
        });
      },
      () => {},
    );
  }

  /** States seen since `since` (ms) that were not Synced and Healthy. */
  departuresSince(since: number): AppMoment[] {
    return this.history.filter((m) => m.at >= since && (m.sync !== 'Synced' || m.health !== 'Healthy'));
  }

  async delete(): Promise<void> {
    this.#abort?.abort();
    await this.kube.custom
      .deleteNamespacedCustomObject({ ...coords(this.namespace), name: this.name })
      .catch(() => undefined);
  }
}

function summary(a: Application): unknown {
  const s = a.status;
  return {
    sync: s?.sync?.status,
    revision: s?.sync?.revision?.slice(0, 8),
    health: s?.health?.status,
    phase: s?.operationState?.phase,
    opRevision: s?.operationState?.syncResult?.revision?.slice(0, 8),
    message: s?.operationState?.message?.slice(0, 300),
    unhealthy: s?.resources?.filter(
      (r) => r.status !== 'Synced' || (r.health && r.health.status !== 'Healthy'),
    ),
  };
}

/**
 * gitops-reloader confined to one test namespace, following the Applications of the real Argo CD.
 * Killed when the test finishes, its own service only: these suites run tests concurrently, so the
 * hook must be the test context's `onTestFinished` (the global one is bound to whichever test vitest
 * last started, and killed another test's service mid-run).
 */
export async function startReloader(
  namespace: string,
  extra: string[],
  o: { onTestFinished: TestContext['onTestFinished']; keyFile?: string },
): Promise<RunningService> {
  const svc = startService(
    serviceArgs(namespace, o.keyFile ?? (await hashKeyFile()), [
      `--argocd-namespaces=${argocdEndpoints().namespace}`,
      ...TEST_TIMINGS.argocd,
      ...extra,
    ]),
  );
  o.onTestFinished(() => svc.kill());
  await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
  return svc;
}
