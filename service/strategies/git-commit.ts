// The git strategy: a reload is a commit that sets the workload's pod-template config hash in the git
// source of the Argo CD Application that tracks it; the pods roll when Argo CD syncs the commit.
//
// Reloads run concurrently (one per workload), but a batch should land as one commit per repository.
// So requests are gathered until none has arrived for a short while, then every write of the
// gathering is handed to the one GitWriter in the same turn, where writes to one repository merge
// into one clone and one commit.

import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { GitWriteError } from '../../git/write-error.ts';
import type {
  ChecksumWorkload,
  CommitAuthor,
  CommitChecksumRequest,
  CommitChecksumResult,
  GitCredentials,
  GitWriter,
  GitWriterOptions,
  WorkloadOutcome,
} from '../../git/writer.ts';
import { type AppKey, appKeyString, type TrackingOptions, trackedBy } from '../argocd/tracking.ts';
import type { Config } from '../config/config.ts';
import { FlagError } from '../config/flags.ts';
import { KEYS } from '../core/annotations.ts';
import { realTimers, type Timers } from '../core/batcher.ts';
import type { WorkloadRecord } from '../core/records.ts';
import { displayURL, parseCredentialScope, type RepoIdentity } from '../core/repo-url.ts';
import { authorizedFluxGitSource, fluxClaim } from '../flux/git-source.ts';
import { authorizedGitSource, type GitSource } from '../gitops/application.ts';
import type { WorkloadId } from '../gitops/authority.ts';
import {
  type CredentialCache,
  checkCredentialsDir,
  type ResolvedCredentials,
  resolveCredentials,
} from '../gitops/credentials.ts';
import { GitRefused } from '../gitops/refusal.ts';
import type { CoreApi, CustomApi } from '../kube/api.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

/** Push attempts per write (the first included); a conflict error means this many rejections. */
const PUSH_ATTEMPTS = 5;

export interface GitCommitterOptions {
  /** The process's one writer. */
  writer: Pick<GitWriter, 'commitChecksum'>;
  /**
   * The git source of the Application a workload names, read at write time; throws GitRefused when
   * the Application does not provably manage the workload.
   */
  source(app: AppKey, workload: WorkloadId): Promise<GitSource>;
  /**
   * With Flux: the git source of the Kustomization a workload's labels name, read at write time;
   * throws GitRefused when the Kustomization did not provably apply the workload.
   */
  fluxSource?(kustomization: AppKey, workload: WorkloadId): Promise<GitSource>;
  /** Credentials for a repository; `cache` is shared by the writes of one gathering. */
  credentials(repo: RepoIdentity, project: string, cache: CredentialCache): Promise<ResolvedCredentials>;
  tracking: TrackingOptions;
  /** --git-allow-insecure-http: write to plain http:// repositories. Default false. */
  allowInsecureHttp?: boolean;
  /** --git-branch: overrides the Application's targetRevision. */
  branch?: string;
  author: CommitAuthor;
  messageTemplate?: string;
  /** --git-signing-key-file: an SSH private key every commit is signed with. */
  signingKeyPath?: string;
  log: Logger;
  metrics?: Metrics;
  /** Write once no request has arrived for this long. Default 300 ms. */
  gatherQuietMs?: number;
  /** …or this long after the first request of a gathering at most. Default 3 s. */
  gatherMaxMs?: number;
  timers?: Timers;
}

interface Target {
  source: GitSource;
  branch: string;
  workload: ChecksumWorkload;
}

interface Group {
  source: GitSource;
  branch: string;
  signal: AbortSignal;
  items: Array<{ r: Request; t: Target }>;
}

interface Request {
  signal: AbortSignal;
  target: Promise<Target>;
  settled: boolean;
  resolve(r: StrategyResult): void;
  reject(err: unknown): void;
}

const GROUPS: Record<WorkloadRecord['ref']['kind'], string> = {
  Deployment: 'apps',
  StatefulSet: 'apps',
  DaemonSet: 'apps',
  CronJob: 'batch',
  Job: 'batch',
  Rollout: 'argoproj.io',
};

export class GitCommitter {
  readonly #o: GitCommitterOptions;
  readonly #timers: Timers;
  #gathering: Request[] = [];
  #quiet: unknown;
  #max: unknown;

  constructor(o: GitCommitterOptions) {
    this.#o = o;
    this.#timers = o.timers ?? realTimers;
  }

  /** Commits the workload's config hash; resolves once it is pushed, or found already in place. */
  reload(
    ctx: Pick<StrategyContext, 'signal'>,
    req: ReloadRequest,
    changed: readonly string[] = [],
  ): Promise<StrategyResult> {
    const { signal } = ctx;
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<StrategyResult>((resolve, reject) => {
      const r: Request = {
        signal,
        target: this.#target(req.workload, req.configHash, changed),
        settled: false,
        resolve: (v) => {
          r.settled = true;
          signal.removeEventListener('abort', onAbort);
          resolve(v);
        },
        reject: (e) => {
          r.settled = true;
          signal.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      // Handled when the gathering is written; this only keeps an early failure from being unhandled.
      r.target.catch(() => undefined);
      const onAbort = () => {
        const i = this.#gathering.indexOf(r);
        // Once handed to the writer, the writer's own abort handling answers.
        if (i >= 0) {
          this.#gathering.splice(i, 1);
          r.reject(signal.reason);
        }
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#gathering.push(r);
      this.#schedule();
    });
  }

  #schedule(): void {
    const t = this.#timers;
    t.clear(this.#quiet);
    this.#quiet = t.set(() => this.#flush(), this.#o.gatherQuietMs ?? 300);
    this.#max ??= t.set(() => this.#flush(), this.#o.gatherMaxMs ?? 3_000);
  }

  #flush(): void {
    this.#timers.clear(this.#quiet);
    this.#timers.clear(this.#max);
    this.#quiet = undefined;
    this.#max = undefined;
    const batch = this.#gathering;
    this.#gathering = [];
    if (batch.length === 0) return;
    this.#write(batch).catch((err: unknown) => {
      // Not expected (each write answers its own requests), but no reload may wait forever.
      this.#o.log.error({ err: (err as Error).message }, 'git write-back failed unexpectedly');
      for (const r of batch) if (!r.settled) r.reject(err);
    });
  }

  /** Where a workload's hash goes: its Application's git source. */
  async #target(rec: WorkloadRecord, hash: string, changed: readonly string[]): Promise<Target> {
    const { kind, namespace, name } = rec.ref;
    const group = GROUPS[kind];
    const tracked = trackedBy(
      { group, kind, namespace, name, annotations: rec.annotations, labels: rec.labels },
      this.#o.tracking,
    );
    const id = { group, kind, namespace, name };
    const claim = tracked.app || !this.#o.fluxSource ? undefined : fluxClaim(rec.labels);
    if (!tracked.app && !claim) {
      throw new Error(
        `no Argo CD Application tracks ${kind} ${namespace}/${name}${tracked.ignored ? ` (${tracked.ignored})` : ''}${this.#o.fluxSource ? ' and no Flux Kustomization labels name it' : ''}; the git strategy commits to the git source of the Application${this.#o.fluxSource ? ' or Kustomization' : ''} that applies the workload`,
      );
    }
    const source =
      claim && this.#o.fluxSource
        ? await this.#o.fluxSource(claim, id)
        : await this.#o.source(tracked.app as AppKey, id);
    const valuesPath = (
      rec.annotations[KEYS.gitValuesPath] ?? rec.templateAnnotations[KEYS.gitValuesPath]
    )?.trim();
    return {
      source,
      branch: this.#o.branch ?? source.targetRevision,
      workload: {
        kind,
        name,
        namespace,
        hash,
        ...(changed.length > 0 ? { configs: [...changed] } : {}),
        ...(valuesPath ? { valuesPath } : {}),
        ...(source.valuesFile ? { valuesFile: source.valuesFile } : {}),
        ...(source.namespaceRequired ? { namespaceRequired: true } : {}),
      },
    };
  }

  async #write(batch: Request[]): Promise<void> {
    const targets = await Promise.allSettled(batch.map((r) => r.target));
    // One writer request per Application source; the writer merges those of one repository.
    const groups = new Map<string, Group>();
    batch.forEach((r, i) => {
      const t = targets[i] as PromiseSettledResult<Target>;
      if (r.settled) return;
      if (t.status === 'rejected') {
        this.#refused(t.reason);
        this.#o.metrics?.gitCommit('failed');
        r.reject(t.reason);
        return;
      }
      const { source, branch } = t.value;
      // Not keyed by the request's signal: each reload has its own (its deadline), and the reloads of
      // one batch must still land as one commit. The group's write stops when any of them stops.
      const key = JSON.stringify([source.repo.canonical, branch, source.path, source.project]);
      let g = groups.get(key);
      if (!g) {
        g = { source, branch, signal: r.signal, items: [] };
        groups.set(key, g);
      }
      g.items.push({ r, t: t.value });
    });
    for (const g of groups.values()) {
      const distinct = [...new Set(g.items.map(({ r }) => r.signal))];
      if (distinct.length > 1) g.signal = AbortSignal.any(distinct);
    }
    if (groups.size === 0) return;

    // Credentials once per repository and project; the writes of one gathering share one Secret list.
    const cache: CredentialCache = {};
    const byRepo = new Map<string, Promise<ResolvedCredentials>>();
    const credentialsFor = (s: GitSource) => {
      const k = JSON.stringify([s.repo.canonical, s.project]);
      let c = byRepo.get(k);
      if (!c) {
        c = this.#o.credentials(s.repo, s.project, cache);
        byRepo.set(k, c);
      }
      return c;
    };
    // Clear-text transports are refused before anything is read or sent.
    const list = [...groups.values()].filter((g) => {
      if (this.#o.allowInsecureHttp || g.source.repo.scheme !== 'http') return true;
      this.#refuse(
        g,
        new GitRefused(
          'insecure-transport',
          `git write refused: the Application's repository URL is plain http://, which would send credentials and content in clear text (an operator can allow it with --git-allow-insecure-http)`,
        ),
      );
      return false;
    });
    const creds = await Promise.allSettled(
      list.map(async (g) => {
        const c = await credentialsFor(g.source);
        if (!c.credentials) {
          throw new GitRefused(
            'credentials-unbound',
            `git write refused: no credentials are bound to ${displayURL(g.source.repo)} (no matching Argo CD repository Secret, and the URL is not in --git-credentials-urls); nothing was sent to it`,
          );
        }
        return c;
      }),
    );
    try {
      const writes: Array<{ g: Group; creds: ResolvedCredentials; result: Promise<CommitChecksumResult> }> =
        [];
      list.forEach((g, i) => {
        const c = creds[i] as PromiseSettledResult<ResolvedCredentials>;
        if (c.status === 'rejected' && c.reason instanceof GitRefused) {
          this.#refuse(g, c.reason);
          return;
        }
        if (c.status === 'rejected') {
          this.#o.metrics?.gitCommit('failed');
          const why = `cannot get git credentials for ${displayURL(g.source.repo)}: ${(c.reason as Error).message}`;
          for (const { r } of g.items) r.reject(new Error(why));
          return;
        }
        const req: CommitChecksumRequest = {
          repoURL: g.source.repoURL,
          branch: g.branch,
          path: g.source.path,
          workloads: g.items.map(({ t }) => t.workload),
          author: this.#o.author,
          ...(c.value.credentials ? { credentials: withUrlUser(c.value.credentials, g.source.repo) } : {}),
          ...(this.#o.messageTemplate ? { messageTemplate: this.#o.messageTemplate } : {}),
          ...(this.#o.signingKeyPath ? { signingKeyPath: this.#o.signingKeyPath } : {}),
          retry: { attempts: PUSH_ATTEMPTS },
          signal: g.signal,
        };
        // No await between these calls: requests made in one turn share a write.
        writes.push({ g, creds: c.value, result: this.#o.writer.commitChecksum(req) });
      });
      const results = await Promise.allSettled(writes.map((w) => w.result));
      const counted = new Set<unknown>();
      results.forEach((res, i) => {
        const w = writes[i] as (typeof writes)[number];
        this.#settle(w.g, w.creds, res, counted);
      });
    } finally {
      const done = creds.map((c) => (c.status === 'fulfilled' ? c.value.cleanup() : undefined));
      await Promise.all(done).catch((err: Error) =>
        this.#o.log.warn({ err: err.message }, 'could not remove temporary git credentials'),
      );
    }
  }

  /** Refuses every request of a group. */
  #refuse(g: Group, err: GitRefused): void {
    this.#refused(err, g.source);
    this.#o.metrics?.gitCommit('failed');
    for (const { r } of g.items) r.reject(err);
  }

  /** Counts and logs a refusal (the log line is the operator's, so it may name the rule's details). */
  #refused(err: unknown, source?: GitSource): void {
    if (!(err instanceof GitRefused)) return;
    this.#o.metrics?.gitRefused(err.rule);
    const where = source ? { ...ownerField(source), repo: displayURL(source.repo) } : {};
    this.#o.log.warn({ ...where, rule: err.rule, err: err.message }, 'git write refused');
  }

  /** Answers every request of one write, and counts the write once even when it was merged with others. */
  #settle(
    g: Group,
    creds: ResolvedCredentials,
    res: PromiseSettledResult<CommitChecksumResult>,
    counted: Set<unknown>,
  ): void {
    const { metrics, log } = this.#o;
    const repo = displayURL(g.source.repo);
    const owner = ownerField(g.source);
    if (res.status === 'rejected') {
      const err = res.reason;
      if (!counted.has(err)) {
        counted.add(err);
        metrics?.gitCommit('failed');
        if (err instanceof GitWriteError && err.reason === 'conflict') {
          for (let n = 1; n < PUSH_ATTEMPTS; n++) metrics?.gitPushRetry();
        }
      }
      const reason = err instanceof GitWriteError ? err.reason : 'error';
      const message = `git write-back failed (${reason}): ${(err as Error).message}${reason === 'auth' ? ` [credentials: ${creds.kind}]` : ''}`;
      log.warn(
        { ...owner, repo, branch: g.branch, reason, credentials: creds.source },
        'git write-back failed',
      );
      for (const { r } of g.items) r.reject(new Error(message));
      return;
    }
    const result = res.value;
    if (result.commit) {
      if (!counted.has(result.commit)) {
        counted.add(result.commit);
        metrics?.gitCommit('committed');
        for (let n = 1; n < result.attempts; n++) metrics?.gitPushRetry();
        log.info(
          {
            ...owner,
            repo,
            branch: result.branch,
            commit: result.commit,
            attempts: result.attempts,
            credentials: creds.source,
          },
          'git write-back committed',
        );
      }
    } else if (result.workloads.some((w) => w.status === 'unchanged')) {
      metrics?.gitCommit('unchanged');
    }
    if (result.workloads.some((w) => w.status === 'failed')) metrics?.gitCommit('failed');
    g.items.forEach(({ r, t }, i) => {
      const o = result.workloads[i] as WorkloadOutcome | undefined;
      const at = `${repo} branch ${result.branch}`;
      const value = `${KEYS.configHash}=${t.workload.hash}`;
      if (!o || o.status === 'failed') {
        r.reject(new Error(`git write-back to ${at}: ${o?.error ?? 'no outcome for this workload'}`));
      } else if (o.status === 'updated' && result.commit) {
        r.resolve({
          replaced: 0,
          summary: `committed ${result.commit.slice(0, 12)} to ${at} (${o.files.join(', ')}: ${value}); the pods roll when ${g.source.syncedBy === 'Flux' ? 'Flux reconciles' : 'Argo CD syncs'} it`,
        });
      } else {
        r.resolve({ replaced: 0, summary: `${at} already has ${value}; nothing to commit` });
      }
    });
  }
}

/** The log field naming whose source a write went to. */
function ownerField(s: GitSource): { app: string } | { kustomization: string } {
  return s.syncedBy === 'Flux' ? { kustomization: appKeyString(s.app) } : { app: appKeyString(s.app) };
}

/**
 * A token without a user name logs in as the https URL's user (`https://bob@host/…`), as git would:
 * the canonical URL the writer is given leaves the user out (service/core/repo-url.ts).
 */
function withUrlUser(c: GitCredentials, repo: RepoIdentity): GitCredentials {
  if ('sshKeyPath' in c || c.username || repo.user === '' || repo.scheme === 'ssh') return c;
  return { ...c, username: repo.user };
}

/** The writer's refusal of a request without workloads: what a valid probe ends with. */
export const NO_WORKLOADS = 'no workloads to write';

/**
 * Checks --git-branch and --git-message-template with the writer's own rules, by a request the
 * writer refuses before it touches the network (it names no workload).
 */
async function writerRejects(req: Pick<CommitChecksumRequest, 'branch' | 'messageTemplate'>) {
  try {
    const { GitWriter } = await import('../../git/writer.ts');
    await new GitWriter().commitChecksum({
      repoURL: 'https://git.invalid/probe',
      path: '',
      workloads: [],
      ...req,
    });
  } catch (err) {
    if (err instanceof GitWriteError && err.message !== NO_WORKLOADS) return err.message;
  }
  return undefined;
}

/**
 * The writer, loaded on its first write: simple-git and the YAML editor cost about 10 MiB of resident
 * memory, and most installations never write to git (bench/README.md, "Where the memory goes").
 */
function lazyWriter(o: GitWriterOptions): Pick<GitWriter, 'commitChecksum'> {
  let writer: Promise<GitWriter> | undefined;
  return {
    commitChecksum: async (req) => {
      writer ??= import('../../git/writer.ts').then(({ GitWriter }) => new GitWriter(o));
      return (await writer).commitChecksum(req);
    },
  };
}

export interface GitCommitterDeps {
  core: CoreApi;
  custom: CustomApi;
  log: Logger;
  metrics?: Metrics;
}

/** The service's git strategy, from the validated config; a bad git flag stops start-up (FlagError). */
export async function createGitCommitter(cfg: Config, d: GitCommitterDeps): Promise<GitCommitter> {
  if (cfg.gitBranch !== undefined) {
    const bad = await writerRejects({ branch: cfg.gitBranch });
    if (bad) throw new FlagError(`invalid value ${JSON.stringify(cfg.gitBranch)} for --git-branch: ${bad}`);
  }
  if (cfg.gitMessageTemplate !== undefined) {
    const bad = await writerRejects({ branch: 'main', messageTemplate: cfg.gitMessageTemplate });
    if (bad) {
      throw new FlagError(
        `invalid value ${JSON.stringify(cfg.gitMessageTemplate)} for --git-message-template: ${bad}`,
      );
    }
  }
  if (!/^[^\s<>]+@[^\s<>]+$/.test(cfg.gitAuthorEmail)) {
    throw new FlagError(
      `invalid value ${JSON.stringify(cfg.gitAuthorEmail)} for --git-author-email: not an email address`,
    );
  }
  if (cfg.gitAuthorName.trim() === '' || /[<>\n]/.test(cfg.gitAuthorName)) {
    throw new FlagError(`invalid value ${JSON.stringify(cfg.gitAuthorName)} for --git-author-name`);
  }
  if (cfg.gitCredentialsDir !== undefined) {
    const bad = await checkCredentialsDir(cfg.gitCredentialsDir);
    if (bad) throw new FlagError(`--git-credentials-dir ${cfg.gitCredentialsDir} ${bad}`);
    if (cfg.gitCredentialsUrls.length === 0) {
      throw new FlagError(
        '--git-credentials-dir needs --git-credentials-urls: the repositories (URL prefixes or hosts) its credentials may be sent to',
      );
    }
  }
  for (const entry of cfg.gitCredentialsUrls) {
    const scope = parseCredentialScope(entry);
    if (scope === undefined) {
      throw new FlagError(
        `invalid value ${JSON.stringify(entry)} for --git-credentials-urls: expected a URL prefix or a host name (a prefix is read as repository URLs are: no .. segment, backslash, %2e/%2f/%5c or password)`,
      );
    }
    if ('prefix' in scope && scope.prefix.scheme === 'http' && !cfg.gitAllowInsecureHttp) {
      throw new FlagError(
        `invalid value ${JSON.stringify(entry)} for --git-credentials-urls: plain http:// needs --git-allow-insecure-http`,
      );
    }
  }
  if (cfg.gitCaFile !== undefined) {
    try {
      await access(cfg.gitCaFile, constants.R_OK);
    } catch (err) {
      throw new FlagError(
        `--git-ca-file ${cfg.gitCaFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  }
  if (cfg.gitSigningKeyFile !== undefined) {
    try {
      await access(cfg.gitSigningKeyFile, constants.R_OK);
    } catch (err) {
      throw new FlagError(
        `--git-signing-key-file ${cfg.gitSigningKeyFile} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  }
  const argocdNamespace = cfg.argocdNamespaces[0] ?? 'argocd';
  const credentialOptions = {
    core: d.core,
    argocdCredentials: cfg.gitArgocdCredentials,
    argocdNamespace,
    ...(cfg.gitCredentialsDir !== undefined ? { credentialsDir: cfg.gitCredentialsDir } : {}),
    credentialsURLs: cfg.gitCredentialsUrls,
  };
  return new GitCommitter({
    writer: lazyWriter({
      allowInsecureHttp: cfg.gitAllowInsecureHttp,
      deadlineMs: cfg.gitDeadlineMs,
      maxCheckoutBytes: cfg.gitMaxCheckoutMib * 1024 * 1024,
      ...(cfg.gitCaFile !== undefined ? { caFile: cfg.gitCaFile } : {}),
    }),
    source: (app, workload) =>
      authorizedGitSource(d.custom, app, workload, { argocdNamespaces: cfg.argocdNamespaces }),
    ...(cfg.fluxNamespaces.length > 0
      ? {
          fluxSource: (ks: AppKey, workload: WorkloadId) =>
            authorizedFluxGitSource(d.custom, ks, workload, { fluxNamespaces: cfg.fluxNamespaces }),
        }
      : {}),
    allowInsecureHttp: cfg.gitAllowInsecureHttp,
    credentials: (repo, project, cache) => resolveCredentials(credentialOptions, repo, project, cache),
    tracking: {
      method: cfg.argocdTracking,
      labelKey: cfg.argocdTrackingLabel,
      controlNamespace: argocdNamespace,
    },
    ...(cfg.gitBranch !== undefined ? { branch: cfg.gitBranch } : {}),
    author: { name: cfg.gitAuthorName, email: cfg.gitAuthorEmail },
    ...(cfg.gitMessageTemplate !== undefined ? { messageTemplate: cfg.gitMessageTemplate } : {}),
    ...(cfg.gitSigningKeyFile !== undefined ? { signingKeyPath: cfg.gitSigningKeyFile } : {}),
    log: d.log,
    ...(d.metrics ? { metrics: d.metrics } : {}),
  });
}
