// A git write the service refuses before it clones anything, and the rule that refused it. The
// message goes into an Event in the workload's namespace, so it names only what that namespace's team
// may see: the rule, and what the team itself wrote (the Application name on its own workload).
import { AUTHORITY_RULES } from './authority.ts';

/** Every rule, for the `rule` label of gitops_reloader_git_refused_total (a fixed, small set). */
export const REFUSAL_RULES = [
  ...AUTHORITY_RULES,
  /**
   * The Application's repository URL is one the service refuses to read (a `.`/`..` segment, a
   * backslash, %2e/%2f/%5c, a control character, a password): service/core/repo-url.ts.
   */
  'repo-url',
  /** The repository URL is plain http:// (or another clear-text transport) and --git-allow-insecure-http is off. */
  'insecure-transport',
  /** No credential is bound to the repository URL: none would be sent, so nothing is tried. */
  'credentials-unbound',
  /** Flux: the Kustomization's sourceRef names a GitRepository outside its own namespace. */
  'source-namespace',
  /**
   * Flux: the inventory cannot be shown to come from the Kustomization's current source and path (not
   * Ready, its current spec not yet applied, or its last applied revision not its source's artifact).
   */
  'not-applied',
] as const;
export type RefusalRule = (typeof REFUSAL_RULES)[number];

export class GitRefused extends Error {
  override name = 'GitRefused';
  readonly rule: RefusalRule;
  constructor(rule: RefusalRule, message: string) {
    super(message);
    this.rule = rule;
  }
}
