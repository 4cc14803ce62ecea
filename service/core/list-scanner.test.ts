import { describe, expect, it } from 'vitest';
import { ListScanner } from './list-scanner.ts';

const list = {
  kind: 'SecretList',
  apiVersion: 'v1',
  metadata: { resourceVersion: '42', continue: 'abc' },
  items: [
    { metadata: { name: 'a', annotations: { x: 'has } and ] and "quotes" \\" inside' } }, data: { k: 'v' } },
    { metadata: { name: 'b' }, data: { list: '[1,2,{3}]' }, nested: [[{}], { deep: [1, { e: [] }] }] },
    { metadata: { name: 'c' } },
  ],
};

function scan(text: string, cut: (t: string) => string[]) {
  const items: unknown[] = [];
  const s = new ListScanner((t) => items.push(JSON.parse(t)));
  for (const piece of cut(text)) s.feed(piece);
  return { items, outer: s.end() };
}

describe('ListScanner', () => {
  it('gives each item on its own and the list without them, however the text is cut', () => {
    const text = JSON.stringify(list);
    const cuts: Array<(t: string) => string[]> = [
      (t) => [t],
      (t) => t.split(''),
      (t) => t.match(/.{1,7}/gs) ?? [],
      (t) => [t.slice(0, 40), t.slice(40, 41), t.slice(41)],
    ];
    for (const cut of cuts) {
      const { items, outer } = scan(text, cut);
      expect(items).toEqual(list.items);
      expect(outer).toEqual({ ...list, items: [] });
    }
  });

  it('handles whitespace, an empty list, and items before the metadata', () => {
    expect(scan('{ "kind" : "X", "items" : [ ] }', (t) => [t])).toEqual({
      items: [],
      outer: { kind: 'X', items: [] },
    });
    const pretty = JSON.stringify(
      { items: [{ a: 1 }, { b: [2] }], metadata: { resourceVersion: '7' } },
      null,
      2,
    );
    expect(scan(pretty, (t) => t.split(''))).toEqual({
      items: [{ a: 1 }, { b: [2] }],
      outer: { items: [], metadata: { resourceVersion: '7' } },
    });
  });

  it('does not take another array for the items, and refuses a cut-off answer', () => {
    const text = JSON.stringify({ metadata: { items: [1] }, other: [{ x: 1 }], items: [{ y: 2 }] });
    expect(scan(text, (t) => [t]).items).toEqual([{ y: 2 }]);
    const s = new ListScanner(() => {});
    s.feed('{"items":[{"a":');
    expect(() => s.end()).toThrow(/mid-object/);
  });
});
