// scopeOf: the namespaces hub mode watches in a served cluster are those both --namespaces and the
// cluster Secret's `namespaces` allow; an empty list allows every namespace.
import { describe, expect, it } from 'vitest';
import { scopeOf } from './seat.ts';

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
