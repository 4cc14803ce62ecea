import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildInfo } from './build-info.ts';

const root = new URL('../', import.meta.url);

describe('buildInfo', () => {
  it("reports package.json's version, a commit and this Node.js", () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version: string };
    const b = buildInfo();
    expect(b.version).toBe(pkg.version);
    expect(b.commit).toMatch(/^([0-9a-f]{7,64}|unknown)$/);
    expect(b.node).toBe(process.versions.node);
  });

  it("the image's version label defaults to package.json's version, and the image stamps the commit", () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version: string };
    const dockerfile = readFileSync(new URL('Dockerfile', root), 'utf8');
    expect(dockerfile).toContain(`ARG VERSION=${pkg.version}\n`);
    expect(dockerfile).toMatch(/org\.opencontainers\.image\.revision=\$\{GIT_COMMIT\}/);
    expect(dockerfile).toMatch(/GIT_COMMIT.*> dist\/build-info\.json/);
  });
});
