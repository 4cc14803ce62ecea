// Splits a Kubernetes LIST answer ({"kind":...,"metadata":...,"items":[{...},{...}]}) into its items as
// the text arrives, so each item is parsed on its own and the page is never held whole: one object's
// size, not the page's, bounds the memory a LIST costs. Pure: fed strings, gives strings.

export class ListScanner {
  readonly #onItem: (text: string) => void;
  #depth = 0;
  #inString = false;
  #escape = false;
  #inItems = false;
  #itemsDone = false;
  /** The list without its items: kind, apiVersion, metadata and `"items":[]`. */
  readonly #outer: string[] = [];
  /** Pieces of the item being read, when one is. */
  #item: string[] | undefined;

  constructor(onItem: (text: string) => void) {
    this.#onItem = onItem;
  }

  /** The list's own fields read so far (small: everything but the items). */
  outerSoFar(): string {
    return this.#outer.join('');
  }

  feed(chunk: string): void {
    let from = 0;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (this.#inString) {
        if (this.#escape) this.#escape = false;
        else if (c === 0x5c /* \ */) this.#escape = true;
        else if (c === 0x22 /* " */) this.#inString = false;
        continue;
      }
      if (c === 0x22) {
        this.#inString = true;
      } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
        if (this.#inItems && this.#depth === 2) {
          from = i;
          this.#item = [];
        }
        this.#depth++;
        if (!this.#inItems && !this.#itemsDone && this.#depth === 2 && c === 0x5b) {
          const before = this.outerSoFar() + chunk.slice(from, i);
          if (/"items"\s*:\s*$/.test(before)) {
            this.#outer.push(chunk.slice(from, i + 1));
            this.#inItems = true;
            from = i + 1;
          }
        }
      } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
        this.#depth--;
        if (this.#inItems && this.#depth === 2 && this.#item) {
          this.#item.push(chunk.slice(from, i + 1));
          const text = this.#item.join('');
          this.#item = undefined;
          from = i + 1;
          this.#onItem(text);
        } else if (this.#inItems && this.#depth === 1 && c === 0x5d) {
          this.#inItems = false;
          this.#itemsDone = true;
          from = i;
        }
      }
    }
    if (this.#item) this.#item.push(chunk.slice(from));
    else if (!this.#inItems) this.#outer.push(chunk.slice(from));
  }

  /** The list's own fields, parsed; throws when the text was not one complete JSON object. */
  end(): { kind?: string; apiVersion?: string; metadata?: { resourceVersion?: string; continue?: string } } {
    if (this.#depth !== 0 || this.#inString || this.#item)
      throw new Error('the LIST answer ended mid-object');
    return JSON.parse(this.outerSoFar()) as ReturnType<ListScanner['end']>;
  }
}
