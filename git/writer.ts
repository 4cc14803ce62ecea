// Commits workloads' checksums to an Application's git source and pushes them. One write is: a fresh
// depth-1 clone into a temp dir, the edits, a commit if anything changed, a push; a push rejected
// because the branch moved is answered by fetching the new tip, re-applying the edits there and
// pushing again, with backoff. Writes to one repository are serialised within the process.
//
// Credentials reach git only through the child's environment: never the command line, the remote URL
// stored in .git/config, a log line or an error message.
import { chmod, copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { type SimpleGit, simpleGit } from 'simple-git';
import { KEYS } from '../service/core/annotations.ts';
import {
  contactURL,
  displayURL,
  parseRepoURL,
  type RepoIdentity,
  RepoURLError,
} from '../service/core/repo-url.ts';
import type { WorkloadKind } from '../service/core/types.ts';
import { type ChecksumTarget, editCheckout, type TargetOutcome } from './edit-checkout.ts';
import { guardSize } from './size-guard.ts';
import { GitWriteError, type GitWriteReason, redactUrl } from './write-error.ts';

export interface ChecksumWorkload {
  kind: WorkloadKind;
  name: string;
  namespace?: string;
  /** The manifest must name `namespace` itself (a Flux Kustomization without targetNamespace). */
  namespaceRequired?: boolean;
  /** The workload's config hash (setDigest of its watched set). */
  hash: string;
  /** Helm only: the values map for pod annotations (gitops-reloader.io/git-values-path). Default podAnnotations. */
  valuesPath?: string;
  /** Helm only: the values file relative to the app path (the last of the Application's valueFiles). */
  valuesFile?: string;
  /** What changed, for the commit message: e.g. ['ConfigMap/web-config']. */
  configs?: string[];
}

export type GitCredentials =
  | { username?: string; token?: string }
  | {
      sshKeyPath: string /** known_hosts file; without it the system's is used, strictly. */;
      knownHostsPath?: string;
    };

export interface CommitAuthor {
  name: string;
  email: string;
}

export interface RetryPolicy {
  /** Push attempts in all, the first included. Default 5. */
  attempts?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
}

export interface CommitChecksumRequest {
  repoURL: string;
  /** The target branch (the Application's targetRevision, or --git-branch), or `base:target` for a review branch. */
  branch: string;
  /** The Application's source path in the repository ('' or '.' for the root). */
  path: string;
  workloads: readonly ChecksumWorkload[];
  credentials?: GitCredentials;
  author?: CommitAuthor;
  /** Placeholders: {{namespace}} {{workload}} {{kind}} {{configs}} {{hash}}. */
  messageTemplate?: string;
  /**
   * Sign commits with this SSH private key (git's gpg.format=ssh; needs ssh-keygen). It is copied
   * into the write's private temp dir, so a mounted Secret's file mode does not matter.
   */
  signingKeyPath?: string;
  /** Default gitops-reloader.io/config-hash; e.g. checksum/config. */
  annotationKey?: string;
  retry?: RetryPolicy;
  signal?: AbortSignal;
}

export interface WorkloadOutcome {
  kind: WorkloadKind;
  name: string;
  namespace?: string;
  /** updated: in the commit; unchanged: the branch already had the value; failed: see error. */
  status: 'updated' | 'unchanged' | 'failed';
  files: string[];
  error?: string;
}

export interface CommitChecksumResult {
  /** The pushed commit, when there was anything to commit. */
  commit?: string;
  pushed: boolean;
  /** Rounds of clone-or-fetch, edit and push (1 when the first push went through). */
  attempts: number;
  /** The branch that was (or would have been) pushed. */
  branch: string;
  workloads: WorkloadOutcome[];
}

export { GitWriteError, type GitWriteReason, redactUrl };

export const DEFAULT_MESSAGE_TEMPLATE =
  'chore(reload): {{namespace}}/{{workload}} config changed ({{configs}})';
export const DEFAULT_AUTHOR: CommitAuthor = { name: 'gitops-reloader', email: 'gitops-reloader@localhost' };
const PLACEHOLDERS = new Set(['namespace', 'workload', 'kind', 'configs', 'hash']);

export interface GitWriterOptions {
  /** Where per-write temp dirs go. Default os.tmpdir(). */
  tmpDir?: string;
  /** Kill a git command that prints nothing for this long. Default 120 s. */
  commandTimeoutMs?: number;
  /** Allow file:// repository URLs (tests, local mirrors). Default false. */
  allowFileURLs?: boolean;
  /**
   * Allow plain http:// repository URLs, which carry credentials in clear text. Default false
   * (--git-allow-insecure-http; loopback tests).
   */
  allowInsecureHttp?: boolean;
  /** Abort a whole write (clone, edits, every push attempt) that takes longer. Default 10 min. */
  deadlineMs?: number;
  /** Abort a write whose clone grows past this many bytes on disk. Default 200 MiB. */
  maxCheckoutBytes?: number;
  /** How often the clone's size is measured while git runs; it is measured again when git is done. Default 250 ms. */
  sizeCheckEveryMs?: number;
  /** A PEM bundle of CAs to verify https servers with (http.sslCAInfo; --git-ca-file). Default: the system's. */
  caFile?: string;
}

interface Job {
  req: CommitChecksumRequest;
  remote: Remote;
  branches: Branches;
  template: string;
  creds: Creds;
  /** Jobs with the same group can share one commit: same remote, branch, credentials, author, key. */
  group: string;
  resolve(result: CommitChecksumResult): void;
  reject(err: unknown): void;
}

/**
 * Holds the per-repository queues. Use one per process: the service creates one at start-up (two
 * writers would serialise nothing between them, which is what the push retries are for).
 *
 * Writes to one repository run one at a time. Requests that arrive while one runs are coalesced: the
 * compatible ones (same branch, credentials, author, annotation key and template) become one clone
 * and one commit, and each caller gets the outcome of its own workloads.
 */
export class GitWriter {
  readonly #opts: Required<Omit<GitWriterOptions, 'caFile'>> & Pick<GitWriterOptions, 'caFile'>;
  readonly #queues = new Map<string, Job[]>();

  constructor(opts: GitWriterOptions = {}) {
    this.#opts = {
      tmpDir: opts.tmpDir ?? tmpdir(),
      commandTimeoutMs: opts.commandTimeoutMs ?? 120_000,
      allowFileURLs: opts.allowFileURLs ?? false,
      allowInsecureHttp: opts.allowInsecureHttp ?? false,
      deadlineMs: opts.deadlineMs ?? 600_000,
      maxCheckoutBytes: opts.maxCheckoutBytes ?? 200 * 1024 * 1024,
      sizeCheckEveryMs: opts.sizeCheckEveryMs ?? 250,
      ...(opts.caFile !== undefined ? { caFile: opts.caFile } : {}),
    };
  }

  /** Sets the workloads' checksums on the branch in one commit (or none, when all are already set). */
  async commitChecksum(req: CommitChecksumRequest): Promise<CommitChecksumResult> {
    const remote = parseRemote(req.repoURL, this.#opts.allowFileURLs, this.#opts.allowInsecureHttp);
    const branches = parseBranch(req.branch);
    const template = req.messageTemplate ?? DEFAULT_MESSAGE_TEMPLATE;
    checkTemplate(template);
    if (req.workloads.length === 0) throw new GitWriteError('no workloads to write', 'invalid');
    const creds = credentialsFor(remote, req.credentials);
    // In memory only, to compare requests; never logged.
    const group = JSON.stringify([
      remote.url,
      req.branch,
      creds.env,
      req.author ?? DEFAULT_AUTHOR,
      template,
      req.annotationKey ?? KEYS.configHash,
      req.retry ?? null,
      req.signingKeyPath ?? null,
    ]);
    return new Promise((resolve, reject) => {
      const job: Job = { req, remote, branches, template, creds, group, resolve, reject };
      const queue = this.#queues.get(remote.key);
      if (queue) {
        queue.push(job);
        return;
      }
      this.#queues.set(remote.key, [job]);
      void this.#drain(remote.key);
    });
  }

  async #drain(key: string): Promise<void> {
    const queue = this.#queues.get(key) as Job[];
    // Let the requests made in the same turn (a batch) join the first write.
    await new Promise((resolve) => setImmediate(resolve));
    while (queue.length > 0) {
      const first = queue[0] as Job;
      const batch = queue.filter((j) => j.group === first.group && j.req.signal === first.req.signal);
      for (const j of batch) queue.splice(queue.indexOf(j), 1);
      try {
        const results = await this.#write(batch);
        batch.forEach((j, i) => {
          j.resolve(results[i] as CommitChecksumResult);
        });
      } catch (err) {
        for (const j of batch) j.reject(err);
      }
    }
    this.#queues.delete(key);
  }

  async #write(batch: readonly Job[]): Promise<CommitChecksumResult[]> {
    const { req, remote, branches, template, creds } = batch[0] as Job;
    const retry = {
      attempts: Math.max(1, req.retry?.attempts ?? 5),
      baseDelayMs: req.retry?.baseDelayMs ?? 250,
      maxDelayMs: req.retry?.maxDelayMs ?? 8_000,
    };
    const key = req.annotationKey ?? KEYS.configHash;
    // Every workload of every job, by app path, in arrival order (a later hash for one workload wins).
    const items = batch.flatMap((job, j) =>
      job.req.workloads.map((w) => ({
        job: j,
        workload: w,
        appPath: normalisePath(job.req.path),
        target: targetOf(w, key),
      })),
    );
    const paths = [...new Set(items.map((i) => i.appPath))];
    const tmp = await mkdtemp(path.join(this.#opts.tmpDir, 'gitops-reloader-git-'));
    const work = path.join(tmp, 'repo');
    const signing: Array<[string, string]> = [];
    if (req.signingKeyPath) {
      const key = path.join(tmp, 'signing-key');
      try {
        await copyFile(req.signingKeyPath, key);
        await chmod(key, 0o600);
      } catch (err) {
        await rm(tmp, { recursive: true, force: true });
        throw new GitWriteError(
          `cannot read the commit signing key: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
          'invalid',
        );
      }
      signing.push(['gpg.format', 'ssh'], ['user.signingKey', key], ['commit.gpgSign', 'true']);
    }
    const tls: Array<[string, string]> = this.#opts.caFile ? [['http.sslCAInfo', this.#opts.caFile]] : [];
    const env = gitEnv(tmp, creds, req.author ?? DEFAULT_AUTHOR, [...tls, ...signing]);
    // One deadline for the whole write: a server that trickles bytes defeats the per-command timeout.
    const deadline = AbortSignal.timeout(this.#opts.deadlineMs);
    const size = guardSize(tmp, this.#opts.maxCheckoutBytes, this.#opts.sizeCheckEveryMs);
    const signals = [deadline, size.signal, ...(req.signal ? [req.signal] : [])];
    const signal = AbortSignal.any(signals);
    const mib = (n: number) => `${Math.ceil(n / 1024 / 1024)} MiB`;
    const run = new Runner(env, creds.secrets, remote.display, this.#opts.commandTimeoutMs, signal, () => {
      const big = size.exceeded();
      if (big !== undefined) {
        return {
          reason: 'too-large',
          message: `the clone grew past ${mib(this.#opts.maxCheckoutBytes)} (${mib(big)} seen) and was stopped; raise --git-max-checkout-mib or point the Application at a smaller repository`,
        };
      }
      return deadline.aborted
        ? {
            reason: 'unreachable',
            message: `the write took longer than its deadline of ${Math.round(this.#opts.deadlineMs / 1000)}s`,
          }
        : undefined;
    });
    try {
      // Argo CD's default targetRevision: the remote's default branch.
      const base = branches.base === 'HEAD' ? await run.defaultBranch(tmp, remote.url) : branches.base;
      const push = branches.review ? branches.push : base;
      let attempts = 0;
      for (;;) {
        attempts++;
        // Review branch: build on it while it exists on the remote (it is still open), else on base.
        const from = branches.review && (await run.branchExists(tmp, remote.url, push)) ? push : base;
        if (attempts === 1) await run.clone(tmp, remote.url, from, work);
        else await run.refetch(work, from);
        // git may finish between two timed measurements: a clone past the limit is refused all the same.
        await size.measure();
        run.checkpoint(attempts === 1 ? `clone branch ${from}` : `fetch ${from}`);
        const outcomes = new Map<(typeof items)[number], TargetOutcome>();
        for (const p of paths) {
          const here = items.filter((i) => i.appPath === p);
          // One workload asked for twice (a newer hash queued behind an older one): only the last is written.
          const latest = new Map(here.map((i) => [sameWorkload(i.target), i.target]));
          const done = await editCheckout(work, p, [...latest.values()]);
          const byWorkload = new Map([...latest.keys()].map((k, n) => [k, done[n] as TargetOutcome]));
          for (const i of here) outcomes.set(i, byWorkload.get(sameWorkload(i.target)) as TargetOutcome);
        }
        const updated = [
          ...new Map(
            items
              .filter((i) => outcomes.get(i)?.status === 'updated')
              .map((i) => [`${i.appPath}\0${sameWorkload(i.target)}`, i]),
          ).values(),
        ];
        const files = [...new Set(updated.flatMap((i) => filesOf(outcomes.get(i))))];
        const commit =
          files.length > 0
            ? await run.commit(
                work,
                files,
                message(
                  template,
                  updated.map((i) => i.workload),
                ),
              )
            : undefined;
        const pushed = commit !== undefined && (await run.push(work, push));
        if (commit === undefined || pushed) {
          return batch.map((_, j) => {
            const mine = items.filter((i) => i.job === j);
            const landed = pushed && mine.some((i) => outcomes.get(i)?.status === 'updated');
            return {
              ...(landed && commit ? { commit } : {}),
              pushed: landed,
              attempts,
              branch: push,
              workloads: mine.map((i) => outcome(i.workload, outcomes.get(i) as TargetOutcome)),
            };
          });
        }
        if (attempts >= retry.attempts) {
          throw new GitWriteError(
            `push to ${remote.display} branch ${push} was rejected ${attempts} times because the branch kept moving; giving up`,
            'conflict',
          );
        }
        const backoff = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempts - 1));
        // Jitter, so that writers that collided do not collide again in step.
        await pause(Math.round(backoff / 2 + Math.random() * (backoff / 2)), signal);
      }
    } finally {
      size.stop();
      await rm(tmp, { recursive: true, force: true });
    }
  }
}

const normalisePath = (p: string) => (p === '.' ? '' : p.replace(/^\/+|\/+$/g, ''));

function targetOf(w: ChecksumWorkload, annotationKey: string): ChecksumTarget {
  return {
    kind: w.kind,
    name: w.name,
    ...(w.namespace === undefined ? {} : { namespace: w.namespace }),
    ...(w.namespaceRequired ? { namespaceRequired: true } : {}),
    hash: w.hash,
    annotationKey,
    ...(w.valuesPath === undefined ? {} : { valuesPath: w.valuesPath }),
    ...(w.valuesFile === undefined ? {} : { valuesFile: w.valuesFile }),
  };
}

const sameWorkload = (t: ChecksumTarget) =>
  JSON.stringify([t.kind, t.namespace ?? '', t.name, t.valuesPath ?? '', t.valuesFile ?? '']);

const filesOf = (o: TargetOutcome | undefined): string[] => (o && o.status !== 'failed' ? o.files : []);

const defaultWriter = new GitWriter();

/** commitChecksum on a process-wide GitWriter. */
export function commitChecksum(req: CommitChecksumRequest): Promise<CommitChecksumResult> {
  return defaultWriter.commitChecksum(req);
}

// --- remote, branch and credentials ------------------------------------------------------------

/** What the writer contacts for a repository URL: exported for the property tests of repo-url. */
export interface Remote {
  /** What git clones: the URL without any userinfo. */
  url: string;
  /** For messages: the URL without userinfo, query or fragment. */
  display: string;
  /** The lock key: one repository, however the URL is spelled. */
  key: string;
  http: boolean;
  /** An http(s) URL's user name (a password in the URL is refused by the parser). */
  username?: string;
}

export function parseRemote(raw: string, allowFile: boolean, allowInsecureHttp: boolean): Remote {
  let id: RepoIdentity;
  try {
    // The one parser (service/core/repo-url.ts): what the service checked is what git is given.
    id = parseRepoURL(raw);
  } catch (err) {
    if (!(err instanceof RepoURLError)) throw err;
    throw new GitWriteError(`repository URL refused: ${err.message}`, 'invalid');
  }
  if (id.scheme === 'file' && !allowFile) {
    throw new GitWriteError('repository URL scheme file: is not supported (https, http, ssh)', 'invalid');
  }
  const display = displayURL(id);
  if (id.scheme === 'http' && !allowInsecureHttp) {
    throw new GitWriteError(
      `repository URL ${display} is plain http: credentials and content would cross the network in clear text (allow it with --git-allow-insecure-http)`,
      'invalid',
    );
  }
  const http = id.scheme === 'http' || id.scheme === 'https';
  return {
    url: contactURL(id),
    display,
    key: id.canonical,
    http,
    ...(http && id.user !== '' ? { username: id.user } : {}),
  };
}

interface Branches {
  base: string;
  push: string;
  review: boolean;
}

function parseBranch(raw: string): Branches {
  const parts = raw.split(':');
  const bad = (b: string) =>
    !/^[A-Za-z0-9._/-]+$/.test(b) || b.startsWith('-') || b.includes('..') || b.endsWith('/');
  if (parts.length > 2 || parts.some((p) => p === '' || bad(p))) {
    throw new GitWriteError(`branch ${JSON.stringify(raw)} is not a branch name or base:target`, 'invalid');
  }
  const [base, target] = parts as [string, string | undefined];
  return target === undefined ? { base, push: base, review: false } : { base, push: target, review: true };
}

interface Creds {
  /** Other env for git (GIT_SSH_COMMAND). */
  env: Record<string, string>;
  /** git config pairs, passed as GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n. */
  config: Array<[string, string]>;
  /** Strings that must never appear in an error message. */
  secrets: string[];
}

function credentialsFor(remote: Remote, given: GitCredentials | undefined): Creds {
  if (given && 'sshKeyPath' in given) {
    if (remote.http) throw new GitWriteError('an SSH key was given for an HTTPS repository URL', 'invalid');
    const safe = /^[A-Za-z0-9._/-]+$/;
    if (!safe.test(given.sshKeyPath) || (given.knownHostsPath && !safe.test(given.knownHostsPath))) {
      throw new GitWriteError(
        'SSH key and known_hosts paths may only contain letters, digits and ._/-',
        'invalid',
      );
    }
    const knownHosts = given.knownHostsPath ? ` -o UserKnownHostsFile=${given.knownHostsPath}` : '';
    return {
      env: {
        GIT_SSH_COMMAND: `ssh -i ${given.sshKeyPath} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes${knownHosts}`,
      },
      config: [],
      secrets: [],
    };
  }
  const username = given?.username ?? remote.username;
  const token = given?.token;
  if (!remote.http || !token) return { env: {}, config: [], secrets: token ? [token] : [] };
  const basic = Buffer.from(`${username || 'x-access-token'}:${token}`).toString('base64');
  // Scoped to this repository's URL; and redirects are not followed at all (see gitEnv).
  return {
    env: {},
    config: [[`http.${remote.url}.extraHeader`, `Authorization: Basic ${basic}`]],
    secrets: [token, basic, encodeURIComponent(token)],
  };
}

function gitEnv(
  tmp: string,
  creds: Creds,
  author: CommitAuthor,
  extra: Array<[string, string]> = [],
): Record<string, string> {
  // Never follow a redirect: a server that answers with a Location on another host or port must not
  // receive the Authorization header, nor make us clone from there. git's default follows the first.
  const config: Array<[string, string]> = [['http.followRedirects', 'false'], ...creds.config, ...extra];
  const pairs = Object.fromEntries(
    config.flatMap(([k, v], i) => [
      [`GIT_CONFIG_KEY_${i}`, k],
      [`GIT_CONFIG_VALUE_${i}`, v],
    ]),
  );
  return {
    GIT_CONFIG_COUNT: String(config.length),
    ...pairs,
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    // An empty home and no system config: no credential helper, url rewrite or hook from the host.
    HOME: tmp,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '',
    SSH_ASKPASS: '',
    LC_ALL: 'C',
    GIT_AUTHOR_NAME: author.name,
    GIT_AUTHOR_EMAIL: author.email,
    GIT_COMMITTER_NAME: author.name,
    GIT_COMMITTER_EMAIL: author.email,
    ...creds.env,
  };
}

// --- git commands ---------------------------------------------------------------------------------

class Runner {
  readonly #env: Record<string, string>;
  readonly #secrets: string[];
  readonly #display: string;
  readonly #timeoutMs: number;
  readonly #signal: AbortSignal | undefined;
  readonly #expired: () => { reason: GitWriteReason; message: string } | undefined;

  constructor(
    env: Record<string, string>,
    secrets: string[],
    display: string,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    expired: () => { reason: GitWriteReason; message: string } | undefined = () => undefined,
  ) {
    this.#env = env;
    this.#secrets = secrets;
    this.#display = display;
    this.#timeoutMs = timeoutMs;
    this.#signal = signal;
    this.#expired = expired;
  }

  #git(dir: string): SimpleGit {
    return simpleGit({
      baseDir: dir,
      allowEnvironment: Object.keys(this.#env),
      allowConfig: [
        'http.*.extraheader',
        'http.followredirects',
        'http.sslcainfo',
        'gpg.format',
        'user.signingkey',
        'commit.gpgsign',
      ],
      timeout: { block: this.#timeoutMs },
      // simple-git treats a non-zero exit without stderr as success; git does not.
      errors: (error, result) =>
        error ??
        (result.exitCode !== 0
          ? Buffer.concat([
              ...result.stdErr,
              ...result.stdOut,
              Buffer.from(`git exited with ${result.exitCode}`),
            ])
          : undefined),
      ...(this.#signal ? { abort: this.#signal } : {}),
    }).env(this.#env);
  }

  /** Throws the write's own stop (the clone too large, the deadline passed) when there is one. */
  checkpoint(doing: string): void {
    const expired = this.#expired();
    if (expired) throw new GitWriteError(`${doing} (${this.#display}): ${expired.message}`, expired.reason);
  }

  async #raw(dir: string, args: string[], doing: string): Promise<string> {
    try {
      return await this.#git(dir).raw(args);
    } catch (err) {
      throw this.#explain(err, doing);
    }
  }

  async clone(tmp: string, url: string, branch: string, into: string): Promise<void> {
    await this.#raw(
      tmp,
      [
        'clone',
        '--quiet',
        '--depth',
        '1',
        '--single-branch',
        '--no-tags',
        '--branch',
        branch,
        '--',
        url,
        into,
      ],
      `clone branch ${branch}`,
    );
    // `clone --branch` also takes a tag, which a push would turn into a new branch of that name.
    const ref = await this.#git(into)
      .raw(['rev-parse', '--verify', '--quiet', `refs/remotes/origin/${branch}`])
      .catch(() => '');
    if (ref.trim() === '') {
      // The size guard or the deadline may have stopped rev-parse itself.
      this.checkpoint(`clone branch ${branch}`);
      throw new GitWriteError(
        `${this.#display}: ${branch} is a tag, not a branch; a pinned revision cannot take a commit (set the branch to write to)`,
        'branch-not-found',
      );
    }
  }

  /** Moves the checkout to the remote's current tip of `branch`, dropping the local commit. */
  async refetch(dir: string, branch: string): Promise<void> {
    await this.#raw(
      dir,
      ['fetch', '--quiet', '--depth', '1', '--no-tags', 'origin', `refs/heads/${branch}`],
      `fetch ${branch}`,
    );
    await this.#raw(dir, ['reset', '--quiet', '--hard', 'FETCH_HEAD'], 'reset to the fetched tip');
    await this.#raw(dir, ['clean', '-q', '-fdx'], 'clean the checkout');
  }

  /** The branch the remote's HEAD points to. */
  async defaultBranch(tmp: string, url: string): Promise<string> {
    const out = await this.#raw(tmp, ['ls-remote', '--symref', '--', url, 'HEAD'], 'read the default branch');
    const branch = /^ref: refs\/heads\/(\S+)\tHEAD$/m.exec(out)?.[1];
    if (!branch) {
      throw new GitWriteError(
        `${this.#display} has no default branch; set the branch explicitly`,
        'branch-not-found',
      );
    }
    return branch;
  }

  async branchExists(tmp: string, url: string, branch: string): Promise<boolean> {
    const out = await this.#raw(
      tmp,
      ['ls-remote', '--heads', '--', url, `refs/heads/${branch}`],
      'list branches',
    );
    return out.trim() !== '';
  }

  /** Commits `files`; undefined when they hold no change after all (never an empty commit). */
  async commit(dir: string, files: string[], msg: string): Promise<string | undefined> {
    await this.#raw(dir, ['add', '--', ...files], 'stage the edits');
    const staged = await this.#raw(dir, ['diff', '--cached', '--name-only'], 'list staged files');
    if (staged.trim() === '') return undefined;
    // Signed only when commit.gpgSign is configured for this write (a signing key was given).
    const sign =
      this.#env.GIT_CONFIG_COUNT !== undefined && Object.values(this.#env).includes('commit.gpgSign');
    await this.#raw(
      dir,
      ['commit', '--quiet', '--no-verify', sign ? '--gpg-sign' : '--no-gpg-sign', '-m', msg],
      sign ? 'sign and commit' : 'commit',
    );
    return (await this.#raw(dir, ['rev-parse', 'HEAD'], 'read the commit')).trim();
  }

  /** true when pushed; false when rejected because the branch moved. */
  async push(dir: string, branch: string): Promise<boolean> {
    try {
      await this.#git(dir).raw(['push', '--quiet', '--no-verify', 'origin', `HEAD:refs/heads/${branch}`]);
      return true;
    } catch (err) {
      const text = errorText(err);
      if (/\[rejected\]|non-fast-forward|fetch first|stale info|cannot lock ref/i.test(text)) return false;
      throw this.#explain(err, `push to ${branch}`);
    }
  }

  #explain(err: unknown, doing: string): GitWriteError {
    const expired = this.#expired();
    if (expired) return new GitWriteError(`${doing} (${this.#display}): ${expired.message}`, expired.reason);
    if (this.#signal?.aborted) return new GitWriteError(`${doing}: aborted`, 'aborted');
    const text = errorText(err);
    const detail = this.#redact(lastLines(text));
    const at = `${doing} (${this.#display})`;
    if (
      /Authentication failed|could not read (Username|Password)|returned error: (401|403)|Permission denied \(publickey|Host key verification failed|HTTP Basic: Access denied|invalid credentials/i.test(
        text,
      )
    ) {
      const why =
        this.#secrets.length === 0 && /could not read (Username|Password)/i.test(text)
          ? 'the server wants credentials and none were given'
          : /could not read (Username|Password)|returned error: 401|Authentication failed/i.test(text)
            ? 'the server refused the credentials'
            : detail;
      return new GitWriteError(`${at}: authentication failed: ${why}`, 'auth');
    }
    if (/Remote branch .* not found|couldn't find remote ref/i.test(text)) {
      return new GitWriteError(`${at}: the branch does not exist (${detail})`, 'branch-not-found');
    }
    if (
      /repository .* not found|returned error: 404|does not appear to be a git repository|not found$/im.test(
        text,
      )
    ) {
      return new GitWriteError(`${at}: the repository was not found (${detail})`, 'repo-not-found');
    }
    if (/\[remote rejected\]|pre-receive hook declined|protected branch/i.test(text)) {
      return new GitWriteError(`${at}: the server refused the push (${detail})`, 'push-rejected');
    }
    if (
      /Could not resolve host|Failed to connect|Connection refused|Connection timed out|Network is unreachable|Could not read from remote|unable to access|timed out|block timeout/i.test(
        text,
      )
    ) {
      return new GitWriteError(`${at}: the remote is unreachable (${detail})`, 'unreachable');
    }
    return new GitWriteError(`${at} failed: ${detail}`, 'git');
  }

  #redact(text: string): string {
    let out = redactUrl(text);
    for (const s of this.#secrets) if (s) out = out.split(s).join('***');
    return out;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function lastLines(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !/^hint:/.test(l));
  return lines.slice(-3).join('; ') || 'no output';
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return delay(ms, undefined, signal ? { signal } : {}).catch(() => {
    throw new GitWriteError('aborted while waiting to retry a push', 'aborted');
  });
}

// --- messages -----------------------------------------------------------------------------------

function checkTemplate(template: string): void {
  for (const m of template.matchAll(/\{\{\s*([^}]*?)\s*\}\}/g)) {
    if (!PLACEHOLDERS.has(m[1] ?? '')) {
      throw new GitWriteError(
        `commit message template: unknown placeholder {{${m[1]}}} (known: ${[...PLACEHOLDERS].join(', ')})`,
        'invalid',
      );
    }
  }
  if (template.trim() === '') throw new GitWriteError('commit message template is empty', 'invalid');
}

function render(template: string, w: ChecksumWorkload): string {
  const values: Record<string, string> = {
    namespace: w.namespace ?? '',
    workload: w.name,
    kind: w.kind,
    configs: w.configs && w.configs.length > 0 ? w.configs.join(', ') : `config hash ${w.hash}`,
    hash: w.hash,
  };
  return template.replace(/\{\{\s*([^}]*?)\s*\}\}/g, (_, name: string) => values[name] ?? '');
}

/** One workload: the template. Several: the first line, "and N more", then one line each. */
function message(template: string, updated: readonly ChecksumWorkload[]): string {
  const lines = updated.map((w) => render(template, w));
  if (lines.length === 1) return lines[0] as string;
  const [first] = (lines[0] as string).split('\n');
  return `${first} and ${lines.length - 1} more\n\n${lines.map((l) => `- ${l.split('\n')[0]}`).join('\n')}`;
}

function outcome(w: ChecksumWorkload, o: TargetOutcome): WorkloadOutcome {
  const base = {
    kind: w.kind,
    name: w.name,
    ...(w.namespace === undefined ? {} : { namespace: w.namespace }),
  };
  return o.status === 'failed'
    ? { ...base, status: 'failed', files: [], error: o.error }
    : { ...base, status: o.status, files: o.files };
}
