// ClusterDirectory: an Application's destination resolves to a cluster as Argo CD resolves it
// (util/argo GetDestinationServer): server, canonical; name only when exactly one cluster Secret has
// it; both set or neither, nothing.
import { describe, expect, it } from 'vitest';
import { ClusterDirectory } from './directory.ts';

const A = 'https://a.example:6443';
const B = 'https://b.example';

function directory(): ClusterDirectory {
  const d = new ClusterDirectory();
  d.put('argocd/cluster-a', { name: 'a', server: A });
  d.put('argocd/cluster-b', { name: 'b', server: B });
  return d;
}

describe('ClusterDirectory', () => {
  it('resolves a server destination to its canonical form', () => {
    const d = directory();
    expect(d.serverOf({ server: A })).toBe(A);
    expect(d.serverOf({ server: 'https://A.Example:6443/' })).toBe(A);
    expect(d.serverOf({ server: 'HTTPS://b.example:443//' })).toBe(B);
  });

  it('resolves a server no cluster Secret registers to itself (no served cluster has it)', () => {
    expect(directory().serverOf({ server: 'https://c.example' })).toBe('https://c.example');
  });

  it('resolves a server it cannot read to nothing', () => {
    const d = directory();
    expect(d.serverOf({ server: 'https://user:pw@a.example:6443' })).toBeUndefined();
    expect(d.serverOf({ server: 'https://a.example:6443/../b' })).toBeUndefined();
    expect(d.serverOf({ server: 'ftp://a.example' })).toBeUndefined();
  });

  it('resolves a name through the one cluster Secret that has it', () => {
    const d = directory();
    expect(d.serverOf({ name: 'a' })).toBe(A);
    expect(d.serverOf({ name: 'b' })).toBe(B);
    expect(d.serverOf({ name: 'c' })).toBeUndefined();
    // Names are matched as written.
    expect(d.serverOf({ name: 'A' })).toBeUndefined();
  });

  it('resolves a name two cluster Secrets share to nothing (ambiguous to Argo CD)', () => {
    const d = directory();
    d.put('argocd/cluster-a2', { name: 'a', server: 'https://a2.example' });
    expect(d.serverOf({ name: 'a' })).toBeUndefined();
    // Even when both name the same server.
    d.put('argocd/cluster-a2', { name: 'a', server: A });
    expect(d.serverOf({ name: 'a' })).toBeUndefined();
    // And again once one of them is gone.
    d.delete('argocd/cluster-a2');
    expect(d.serverOf({ name: 'a' })).toBe(A);
  });

  it('resolves a destination with both server and name, or neither, to nothing', () => {
    const d = directory();
    expect(d.serverOf({ server: A, name: 'a' })).toBeUndefined();
    expect(d.serverOf({ server: B, name: 'a' })).toBeUndefined();
    expect(d.serverOf({})).toBeUndefined();
    expect(d.serverOf({ server: '', name: '' })).toBeUndefined();
    // An empty field is an unset one.
    expect(d.serverOf({ server: '', name: 'a' })).toBe(A);
    expect(d.serverOf({ server: A, name: '' })).toBe(A);
  });

  it('forgets a deleted cluster Secret, and says whether it knew it', () => {
    const d = directory();
    expect(d.delete('argocd/cluster-a')).toBe(true);
    expect(d.serverOf({ name: 'a' })).toBeUndefined();
    expect(d.delete('argocd/cluster-a')).toBe(false);
    expect(d.serverOf({ name: 'b' })).toBe(B);
  });

  it('follows a cluster Secret that renames its cluster or moves its server', () => {
    const d = directory();
    d.put('argocd/cluster-a', { name: 'renamed', server: A });
    expect(d.serverOf({ name: 'a' })).toBeUndefined();
    expect(d.serverOf({ name: 'renamed' })).toBe(A);
    d.put('argocd/cluster-a', { name: 'renamed', server: 'https://moved.example' });
    expect(d.serverOf({ name: 'renamed' })).toBe('https://moved.example');
  });

  it('put says whether anything changed', () => {
    const d = new ClusterDirectory();
    expect(d.put('argocd/cluster-a', { name: 'a', server: A })).toBe(true);
    expect(d.put('argocd/cluster-a', { name: 'a', server: A })).toBe(false);
    expect(d.put('argocd/cluster-a', { name: 'a2', server: A })).toBe(true);
    expect(d.put('argocd/cluster-a', { name: 'a2', server: B })).toBe(true);
    expect(d.put('argocd/cluster-b', { name: 'a2', server: B })).toBe(true);
    expect(d.put('argocd/cluster-b', { name: 'a2', server: B })).toBe(false);
  });
});
