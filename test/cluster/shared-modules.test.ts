import { describe, expect, it } from 'vitest';
import { type BuildList, compareVersions, parseBuildList, skew } from './shared-modules.ts';

const list = (entries: Record<string, string | [string, string]>): BuildList =>
  new Map(
    Object.entries(entries).map(([p, v]) => [
      p,
      typeof v === 'string' ? { version: v } : { version: v[0], replacedBy: v[1] },
    ]),
  );

describe('Go module versions', () => {
  it('orders releases, pre-releases and pseudo-versions as Go does', () => {
    expect(compareVersions('v0.49.0', 'v0.56.0')).toBeLessThan(0);
    expect(compareVersions('v1.10.0', 'v1.9.9')).toBeGreaterThan(0);
    expect(compareVersions('v1.0.0-rc.1', 'v1.0.0')).toBeLessThan(0);
    expect(
      compareVersions('v0.0.0-20260414002931-afd174a4e478', 'v0.0.0-20260128011058-8636f8732409'),
    ).toBeGreaterThan(0);
    expect(compareVersions('v0.36.3', 'v0.36.3')).toBe(0);
    expect(() => compareVersions('latest', 'v1.0.0')).toThrow(/not a Go module version: latest/);
  });
});

describe('the build lists of the modules that share k8s.io packages', () => {
  it('parses go list -m -json all, skipping the main module and keeping replacements', () => {
    const out = `{
	"Path": "gitops-reloader/test/cluster/kwok",
	"Main": true
}
{
	"Path": "golang.org/x/net",
	"Version": "v0.56.0",
	"GoMod": "/m/cache/download/golang.org/x/net/@v/v0.56.0.mod"
}
{
	"Path": "k8s.io/kubectl",
	"Version": "v0.36.3",
	"Replace": {
		"Path": "k8s.io/kubectl",
		"Version": "v0.36.3",
		"Note": "a } and a \\" in a string"
	}
}
`;
    expect([...parseBuildList(out)]).toEqual([
      ['golang.org/x/net', { version: 'v0.56.0' }],
      ['k8s.io/kubectl', { version: 'v0.36.3', replacedBy: 'v0.36.3' }],
    ]);
  });

  it('finds a module two builds select at different versions, and says where to raise it', () => {
    const s = skew({
      kubernetes: list({ 'golang.org/x/net': 'v0.49.0', 'k8s.io/api': 'v0.36.3' }),
      kwok: list({ 'golang.org/x/net': 'v0.56.0', 'k8s.io/api': 'v0.36.3' }),
      helm: list({ 'golang.org/x/net': 'v0.56.0' }),
    });
    expect(s).toEqual([
      {
        module: 'golang.org/x/net',
        seen: { kubernetes: 'v0.49.0', kwok: 'v0.56.0', helm: 'v0.56.0' },
        raise: [{ in: 'kubernetes', to: 'v0.56.0' }],
      },
    ]);
  });

  it('counts a replacement by another version as skew: the package is keyed by the version it replaces', () => {
    const s = skew({
      kubernetes: list({ 'golang.org/x/text': 'v0.33.0' }),
      kwok: list({ 'golang.org/x/text': ['v0.34.0', 'v0.33.0'] }),
    });
    expect(s.map((x) => x.module)).toEqual(['golang.org/x/text']);
    // Kubernetes's staging modules, required and replaced at one release, are no skew.
    expect(
      skew({
        kubernetes: list({ 'k8s.io/kubectl': ['v0.36.3', 'v0.36.3'] }),
        helm: list({ 'k8s.io/kubectl': 'v0.36.3' }),
      }),
    ).toEqual([]);
  });

  it('ignores modules one build alone selects, or compiles a package of', () => {
    const lists = {
      kubernetes: list({ a: 'v1.0.0', b: 'v1.0.0' }),
      kwok: list({ a: 'v1.2.0', b: 'v1.1.0', c: 'v2.0.0' }),
    };
    expect(skew(lists).map((x) => x.module)).toEqual(['a', 'b']);
    // kwok's list names a, but no package of it is compiled for kwok: no second compile.
    const provides = { kubernetes: new Set(['a', 'b']), kwok: new Set(['b', 'c']) };
    expect(skew(lists, provides).map((x) => x.module)).toEqual(['b']);
  });
});
