// scopeOf: the namespaces hub mode watches in a served cluster are those both --namespaces and the
// cluster Secret's `namespaces` allow; an empty list allows every namespace.
import { describe, expect, it } from 'vitest';
import { admit, promotions, replicaOf, scopeOf, seatIdentity } from './seat.ts';

describe('scopeOf', () => {
  it('is every namespace when neither the flags nor the cluster Secret limit it', () => {
    expect(scopeOf([], [])).toEqual([]);
  });

  it("is the flags' namespaces when the cluster Secret lists none", () => {
    expect(scopeOf(['team-a', 'team-b'], [])).toEqual(['team-a', 'team-b']);
  });

  it("is the cluster Secret's namespaces when the flags list none", () => {
    expect(scopeOf([], ['team-b', 'team-c'])).toEqual(['team-b', 'team-c']);
  });

  it('is the namespaces both list', () => {
    expect(scopeOf(['team-a', 'team-b', 'team-c'], ['team-c', 'team-b', 'team-x'])).toEqual([
      'team-b',
      'team-c',
    ]);
  });

  it('is nothing to serve when they share no namespace', () => {
    expect(scopeOf(['team-a'], ['team-b'])).toBeUndefined();
  });

  it('returns a list of its own, not one of its inputs', () => {
    const flags = ['team-a'];
    const secret = ['team-b'];
    expect(scopeOf(flags, [])).not.toBe(flags);
    expect(scopeOf([], secret)).not.toBe(secret);
  });
});

describe('admit', () => {
  const c = (secret: string, server: string, id: string) => ({ secret, server, id });

  it('admits a cluster whose server and id no open seat has', () => {
    expect(admit([c('a', 'https://a', 'a-1')], { server: 'https://b', id: 'b-2' })).toEqual({ admit: true });
  });

  it('refuses a second seat for one server', () => {
    expect(admit([c('a', 'https://a', 'a-1')], { server: 'https://a', id: 'a-1' })).toEqual({
      sameServer: 'a',
    });
  });

  it('refuses two servers with one id, naming the open one (which is closed too)', () => {
    expect(admit([c('victim', 'https://v', 'x-1')], { server: 'https://crafted', id: 'x-1' })).toEqual({
      sameId: 'victim',
      server: 'https://v',
    });
  });
});

describe('seat identities', () => {
  it('elects each seat as <replica>/<cluster id>, and reads the replica back', () => {
    const id = seatIdentity('hub-7f9c-abcde', 'spoke-example-0123456789abcdef0123456789abcdef');
    expect(id).toBe('hub-7f9c-abcde/spoke-example-0123456789abcdef0123456789abcdef');
    expect(replicaOf(id)).toBe('hub-7f9c-abcde');
    expect(replicaOf('plain-identity')).toBe('plain-identity');
  });

  it('gives two clusters of one replica two identities', () => {
    expect(seatIdentity('r', 'a-1')).not.toBe(seatIdentity('r', 'b-2'));
  });
});

describe('promotions', () => {
  const want = (...cs: Array<[string, string, string]>) =>
    new Map(cs.map(([secret, server, id]) => [secret, { server, id }]));

  it('serves a duplicate Secret once the one serving its server is gone (the first by name)', () => {
    const wanting = want(['argocd/new-b', 'https://a', 'a-1'], ['argocd/new-a', 'https://a', 'a-1']);
    expect(promotions(wanting, () => false)).toEqual(['argocd/new-a']);
    expect(promotions(wanting, (s) => s === 'https://a')).toEqual([]);
  });

  it('serves neither of two servers with one id, and the other once one goes', () => {
    const both = want(['argocd/victim', 'https://v', 'x-1'], ['argocd/crafted', 'https://c', 'x-1']);
    expect(promotions(both, () => false)).toEqual([]);
    both.delete('argocd/crafted');
    expect(promotions(both, () => false)).toEqual(['argocd/victim']);
  });
});
