// The one decision of which credentials reach a served cluster: a credentials Secret of ours, once it
// names a server, is the only source for it; refused, it holds the cluster or keeps our last good
// ones, and Argo CD's are never used (issue 35, finding 3). Property tests over generated sets of
// Secrets and seat states.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CredentialsReading, ServedCluster } from './cluster-secret.ts';
import { carryServer, chooseCredentials, nextStep, type SeatUsing } from './credentials-choice.ts';

const SERVER = 'https://spoke.example';
const OTHER = 'https://other.example';

const cluster = (credentials: ServedCluster['credentials'] = argo): ServedCluster => ({
  secret: 'argocd/cluster-spoke',
  server: SERVER,
  name: 'spoke',
  namespaces: [],
  credentials,
  id: 'spoke-example-00000000',
});
const argo = { credentials: { bearerToken: 'argo-admin', insecure: false }, credentialsDigest: 'd-argo' };

const good = (secret: string, server = SERVER, token = `tok-${secret}`): CredentialsReading => ({
  secret: `gr/${secret}`,
  server,
  credentials: { bearerToken: token, insecure: false },
  credentialsDigest: `d-${token}`,
});
const refused = (secret: string, server?: string): CredentialsReading => ({
  secret: `gr/${secret}`,
  refused: `credentials Secret gr/${secret}: config is not a JSON object`,
  ...(server !== undefined ? { server } : {}),
});
const byName = (...rs: CredentialsReading[]) => new Map(rs.map((r) => [r.secret, r]));

describe('chooseCredentials', () => {
  it("uses the cluster Secret's credentials when no Secret of ours names the server", () => {
    expect(chooseCredentials(cluster(), byName(good('x', OTHER)))).toMatchObject({
      use: argo.credentials,
      from: 'cluster Secret argocd/cluster-spoke',
      ours: false,
    });
  });

  it('uses ours when one names the server (the first by namespace/name)', () => {
    expect(chooseCredentials(cluster(), byName(good('b'), good('a')))).toMatchObject({
      use: { bearerToken: 'tok-a' },
      from: 'credentials Secret gr/a',
      ours: true,
    });
  });

  it("holds the cluster when ours for its server is refused, never using Argo CD's", () => {
    expect(chooseCredentials(cluster(), byName(refused('a', SERVER)))).toEqual({
      hold: expect.stringContaining('config is not a JSON object'),
      secret: 'gr/a',
      ours: true,
    });
    // Even next to a good one of ours: the platform team's Secret is broken, and that is said.
    expect(chooseCredentials(cluster(), byName(good('a'), refused('b', SERVER)))).toMatchObject({
      hold: expect.any(String),
      secret: 'gr/b',
    });
  });

  it("holds a cluster whose cluster Secret's credentials are refused (an exec block), until ours exist", () => {
    const c = cluster({ refused: 'exec never in a cluster Secret' });
    expect(chooseCredentials(c, byName())).toEqual({
      hold: 'exec never in a cluster Secret',
      secret: 'argocd/cluster-spoke',
      ours: false,
    });
    expect(chooseCredentials(c, byName(good('a')))).toMatchObject({ use: { bearerToken: 'tok-a' } });
  });

  it("never chooses Argo CD's credentials while any Secret of ours names the server (property)", () => {
    const reading = fc.record({
      name: fc.constantFrom('a', 'b', 'c', 'd'),
      server: fc.constantFrom(SERVER, OTHER, undefined),
      ok: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(reading, { maxLength: 6 }), (rs) => {
        const ours = byName(
          ...rs.map((r) => (r.ok && r.server ? good(r.name, r.server) : refused(r.name, r.server))),
        );
        const choice = chooseCredentials(cluster(), ours);
        const namesIt = [...ours.values()].some((r) => r.server === SERVER);
        if (namesIt) expect('use' in choice && choice.use === argo.credentials).toBe(false);
        if (namesIt && 'use' in choice) expect(choice.ours).toBe(true);
        const anyRefused = [...ours.values()].some((r) => r.server === SERVER && 'refused' in r);
        expect('hold' in choice).toBe(anyRefused);
      }),
      { numRuns: 500 },
    );
  });
});

describe('nextStep', () => {
  const ours: SeatUsing = { digest: 'd-tok-a', from: 'credentials Secret gr/a', ours: true };
  const theirs: SeatUsing = { digest: 'd-argo', from: 'cluster Secret argocd/cluster-spoke', ours: false };

  it('keeps our last good credentials when a Secret of ours is refused', () => {
    const choice = chooseCredentials(cluster(), byName(refused('a', SERVER)));
    expect(nextStep(ours, choice)).toMatchObject({ step: 'keep', secret: 'gr/a' });
  });

  it("holds a seat that uses Argo CD's credentials (or none) when ours for it are refused", () => {
    const choice = chooseCredentials(cluster(), byName(refused('a', SERVER)));
    expect(nextStep(theirs, choice)).toMatchObject({ step: 'hold', secret: 'gr/a' });
    expect(nextStep({ held: 'other reason' }, choice)).toMatchObject({ step: 'hold' });
    expect(nextStep({ held: (choice as { hold: string }).hold }, choice)).toEqual({ step: 'unchanged' });
  });

  it("holds, not keeps, when ours were deleted and the cluster Secret's are refused", () => {
    const choice = chooseCredentials(cluster({ refused: 'exec' }), byName());
    expect(nextStep(ours, choice)).toMatchObject({ step: 'hold' });
  });

  it('rotates on new credentials, and does nothing when they are the same', () => {
    const choice = chooseCredentials(cluster(), byName(good('a')));
    expect(nextStep(ours, choice)).toEqual({ step: 'unchanged' });
    expect(nextStep(theirs, choice)).toMatchObject({
      step: 'rotate',
      to: { from: 'credentials Secret gr/a' },
    });
    expect(nextStep({ held: 'x' }, choice)).toMatchObject({ step: 'rotate' });
  });

  it("never rotates to Argo CD's credentials while a Secret of ours names the server (property)", () => {
    const using = fc.constantFrom<SeatUsing>(ours, theirs, { held: 'x' });
    const reading = fc.record({ name: fc.constantFrom('a', 'b'), ok: fc.boolean() });
    fc.assert(
      fc.property(using, fc.array(reading, { minLength: 1, maxLength: 3 }), (now, rs) => {
        const choice = chooseCredentials(
          cluster(),
          byName(...rs.map((r) => (r.ok ? good(r.name) : refused(r.name, SERVER)))),
        );
        const step = nextStep(now, choice);
        if (step.step === 'rotate') expect(step.to.ours).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('carryServer', () => {
  it('keeps holding the server a Secret named when an edit makes its server unreadable', () => {
    expect(carryServer(good('a'), refused('a'))).toMatchObject({
      server: SERVER,
      refused: expect.any(String),
    });
    expect(carryServer(refused('a', SERVER), refused('a'))).toMatchObject({ server: SERVER });
  });

  it('takes a new reading as it is otherwise', () => {
    expect(carryServer(undefined, refused('a'))).toEqual(refused('a'));
    expect(carryServer(good('a'), refused('a', OTHER))).toEqual(refused('a', OTHER));
    expect(carryServer(refused('a', SERVER), good('a', OTHER))).toEqual(good('a', OTHER));
  });
});
