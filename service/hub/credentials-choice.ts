// Which credentials a served cluster is reached with, decided here and nowhere else. Our own
// credentials Secrets (release namespace) are the platform team's least-privilege choice: while one
// names the cluster's server, Argo CD's cluster Secret credentials (usually cluster-admin) are never
// used for it, even when ours are refused (broken JSON, an exec command not listed). A refusal holds
// the cluster, or keeps the last good credentials of ours it already uses; it never falls back
// (issue 35, finding 3). Pure: hub.ts applies the step to the seat's access.
import type { ClusterCredentials, CredentialsReading, ServedCluster } from './cluster-secret.ts';

export type CredentialsChoice =
  | { use: ClusterCredentials; digest: string; from: string; ours: boolean }
  /** Held: `secret` is the Secret whose refusal holds it; `ours` when that is a credentials Secret of ours. */
  | { hold: string; secret: string; ours: boolean };

/**
 * The credentials for `cluster`: a credentials Secret of ours for its server, when there is one (the
 * first by namespace/name); else the cluster Secret's own. Any refused Secret of ours for the server
 * holds it, whatever else exists; a cluster Secret whose credentials were refused holds it too.
 */
export function chooseCredentials(
  cluster: ServedCluster,
  ours: ReadonlyMap<string, CredentialsReading>,
): CredentialsChoice {
  const forServer = [...ours.values()]
    .filter((r) => r.server === cluster.server)
    .sort((a, b) => a.secret.localeCompare(b.secret));
  for (const r of forServer) if ('refused' in r) return { hold: r.refused, secret: r.secret, ours: true };
  const mine = forServer[0];
  if (mine && !('refused' in mine)) {
    return {
      use: mine.credentials,
      digest: mine.credentialsDigest,
      from: `credentials Secret ${mine.secret}`,
      ours: true,
    };
  }
  const c = cluster.credentials;
  if ('refused' in c) return { hold: c.refused, secret: cluster.secret, ours: false };
  return {
    use: c.credentials,
    digest: c.credentialsDigest,
    from: `cluster Secret ${cluster.secret}`,
    ours: false,
  };
}

/** What a seat's access uses now: credentials (from ours or not, by digest), or nothing (held). */
export type SeatUsing = { digest: string; from: string; ours: boolean } | { held: string };

export type SeatStep =
  | { step: 'unchanged' }
  | { step: 'rotate'; to: Extract<CredentialsChoice, { use: ClusterCredentials }> }
  /** A refused Secret of ours, and the seat uses good ones already: they stay until it is fixed. */
  | { step: 'keep'; reason: string; secret: string }
  | { step: 'hold'; reason: string; secret: string };

/** The step from what a seat uses to what `choice` says: never from ours to Argo CD's on a refusal. */
export function nextStep(now: SeatUsing, choice: CredentialsChoice): SeatStep {
  if ('use' in choice) {
    return 'digest' in now && now.digest === choice.digest
      ? { step: 'unchanged' }
      : { step: 'rotate', to: choice };
  }
  if (choice.ours && 'digest' in now && now.ours)
    return { step: 'keep', reason: choice.hold, secret: choice.secret };
  if ('held' in now && now.held === choice.hold) return { step: 'unchanged' };
  return { step: 'hold', reason: choice.hold, secret: choice.secret };
}

/**
 * A reading of one Secret of ours, given its previous one: a refusal that could not read the server
 * (a typo in `server`) still holds the server that Secret named before.
 */
export function carryServer(
  previous: CredentialsReading | undefined,
  next: CredentialsReading,
): CredentialsReading {
  if ('refused' in next && next.server === undefined && previous?.server !== undefined) {
    return { ...next, server: previous.server };
  }
  return next;
}
