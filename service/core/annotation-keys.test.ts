import { describe, expect, it } from 'vitest';
import { annotationKeyProblem, withDefaultKeys } from './annotation-keys.ts';

const ALIASES = { 'reloader.stakater.com/auto': 'example.com/auto' };

describe("Reloader's custom annotation keys", () => {
  it('reads the custom key as the default one, and no longer reads the default key', () => {
    expect(withDefaultKeys({ 'example.com/auto': 'true', other: 'x' }, ALIASES)).toEqual({
      'example.com/auto': 'true',
      other: 'x',
      'reloader.stakater.com/auto': 'true',
    });
    expect(withDefaultKeys({ 'reloader.stakater.com/auto': 'true' }, ALIASES)).toEqual({});
    expect(withDefaultKeys({ 'gitops-reloader.io/auto': 'true' }, ALIASES)).toEqual({
      'gitops-reloader.io/auto': 'true',
    });
  });

  it('leaves maps alone without aliases', () => {
    const m = { a: 'b' };
    expect(withDefaultKeys(m, undefined)).toBe(m);
    expect(withDefaultKeys(m, {})).toBe(m);
  });

  it('accepts annotation keys and names what is wrong with others', () => {
    expect(annotationKeyProblem('example.com/reload')).toBeUndefined();
    expect(annotationKeyProblem('reload')).toBeUndefined();
    expect(annotationKeyProblem('Example.com/reload')).toMatch(/prefix/);
    expect(annotationKeyProblem('example.com/')).toMatch(/not 1-63/);
    expect(annotationKeyProblem('example.com/a b')).toMatch(/not 1-63/);
  });
});
