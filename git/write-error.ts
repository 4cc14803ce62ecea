// The git writer's failure type and URL redaction, without the writer itself: the service reports
// git failures with these, and loads the writer (simple-git, yaml) only when git mode is used.

export type GitWriteReason =
  | 'invalid'
  | 'auth'
  | 'unreachable'
  | 'repo-not-found'
  | 'branch-not-found'
  | 'push-rejected'
  | 'conflict'
  | 'aborted'
  | 'too-large'
  | 'git';

/** A repository-level failure. The message names the repository without credentials. */
export class GitWriteError extends Error {
  override name = 'GitWriteError';
  readonly reason: GitWriteReason;
  constructor(message: string, reason: GitWriteReason) {
    super(message);
    this.reason = reason;
  }
}

/** Removes userinfo from every URL in a text. */
export function redactUrl(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@'"]+@/gi, '$1***@');
}
