// Lists of ConfigMap/Secret names as users write them in annotations and flags: comma-separated,
// each entry an exact name or a regex anchored at both ends ("app-.*" matches "app-x", not "my-app-x").
//
// Reloader compiles entries with Go's RE2, which runs in linear time. JavaScript's engine backtracks,
// so a pattern such as (a+)+ or (a|aa)* can take minutes on a 253-character name. We refuse the
// shapes that cause that (see checkPattern) instead of running them.

/** Longest entry accepted. Kubernetes names are at most 253 characters. */
export const MAX_ENTRY_LENGTH = 256;
/** Most unbounded repetitions (*, +, {n,}) in one entry: each one multiplies the worst-case work. */
export const MAX_UNBOUNDED_REPEATS = 3;

export interface NameEntry {
  /** The entry as written (trimmed). */
  readonly text: string;
  /** Undefined for a plain name, matched by equality. */
  readonly regex: RegExp | undefined;
}

export interface NameList {
  readonly entries: readonly NameEntry[];
}

export const EMPTY_NAME_LIST: NameList = { entries: [] };

/** Splits a comma list, trims each entry and drops empty ones ("a, b,," → ["a", "b"]). */
export function splitList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

// Characters that mean the same thing as a literal and as a regex; such an entry needs no regex.
const PLAIN = /^[A-Za-z0-9_-]+$/;

/**
 * Compiles entries into a NameList. `exact` treats every entry as a literal name (Reloader's exclude
 * lists work that way). Problems name the entry and say what is wrong; bad entries are left out.
 */
export function compileNameList(
  entries: readonly string[],
  mode: 'pattern' | 'exact' = 'pattern',
): { list: NameList; problems: string[] } {
  const out: NameEntry[] = [];
  const problems: string[] = [];
  for (const raw of entries) {
    const text = raw.trim();
    if (text === '') continue;
    if (mode === 'exact') {
      out.push({ text, regex: undefined });
      continue;
    }
    const unsafe = checkPattern(text);
    if (unsafe !== undefined) {
      problems.push(`entry ${JSON.stringify(text)} ${unsafe}`);
      continue;
    }
    if (PLAIN.test(text)) {
      out.push({ text, regex: undefined });
      continue;
    }
    try {
      // The group makes the anchors cover the whole entry: "a|b" must not match "a-suffix".
      out.push({ text, regex: new RegExp(`^(?:${text})$`) });
    } catch (err) {
      problems.push(`entry ${JSON.stringify(text)} is not a valid regex: ${(err as Error).message}`);
    }
  }
  return { list: { entries: out }, problems };
}

/** The first entry that matches `name`, or undefined. */
export function matchName(list: NameList, name: string): NameEntry | undefined {
  return list.entries.find((e) => (e.regex === undefined ? e.text === name : e.regex.test(name)));
}

// Escapes that mean the same in Go RE2 and JavaScript. Others (\A, \z, \pL, \Q…\E, \1, \k<n>, \u…)
// either do not exist in one of them or mean something else, so an entry would silently change meaning.
const PORTABLE_ESCAPE = /[dDwWsSbBfnrtvx]/;

interface Quantifier {
  length: number;
  /** Can repeat its atom more than once. */
  repeats: boolean;
  /** Has no useful upper bound. */
  unbounded: boolean;
}

function readQuantifier(src: string, i: number): Quantifier | undefined {
  const c = src[i];
  let q: Quantifier | undefined;
  if (c === '*' || c === '+') q = { length: 1, repeats: true, unbounded: true };
  else if (c === '?') q = { length: 1, repeats: false, unbounded: false };
  else if (c === '{') {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(src.slice(i));
    if (!m) return undefined; // a literal "{"
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === '' ? Number.POSITIVE_INFINITY : Number(m[3]);
    q = { length: m[0].length, repeats: max > 1, unbounded: max > 32 };
  }
  if (q && src[i + q.length] === '?') q.length += 1; // lazy form
  return q;
}

/**
 * Why `src` is refused, or undefined when it is safe to run. Refused: entries longer than
 * MAX_ENTRY_LENGTH; a repeated group holding a repetition or an alternation, e.g. (a+)+ or (a|ab)*,
 * which can take exponential time; more than MAX_UNBOUNDED_REPEATS unbounded repetitions;
 * backreferences and lookaround (RE2 has neither, so Reloader rejects them too); escapes and POSIX
 * classes that Go and JavaScript read differently.
 */
export function checkPattern(src: string): string | undefined {
  if (src.length > MAX_ENTRY_LENGTH) {
    return `is ${src.length} characters long; the limit is ${MAX_ENTRY_LENGTH}`;
  }
  // One frame per open group: does its body repeat or alternate anything?
  const frames: { repeats: boolean; alternates: boolean }[] = [{ repeats: false, alternates: false }];
  let unbounded = 0;
  let i = 0;
  const top = () => frames[frames.length - 1] as { repeats: boolean; alternates: boolean };
  const applyQuantifier = (): Quantifier | undefined => {
    const q = readQuantifier(src, i);
    if (q) {
      i += q.length;
      top().repeats = true;
      if (q.unbounded) unbounded += 1;
    }
    return q;
  };
  while (i < src.length) {
    const c = src[i] as string;
    if (c === '\\') {
      const next = src[i + 1];
      if (next === undefined) return 'ends with a lone backslash';
      if (/[A-Za-z0-9]/.test(next) && !PORTABLE_ESCAPE.test(next)) {
        return `uses \\${next}, which Go's RE2 (Reloader) and JavaScript read differently or not at all`;
      }
      i += 2;
      applyQuantifier();
      continue;
    }
    if (c === '[') {
      let j = i + 1;
      if (src[j] === '^') j += 1;
      for (; j < src.length && src[j] !== ']'; j += 1) {
        if (src[j] === '\\') {
          const next = src[j + 1];
          if (next !== undefined && /[A-Za-z0-9]/.test(next) && !PORTABLE_ESCAPE.test(next)) {
            return `uses \\${next}, which Go's RE2 (Reloader) and JavaScript read differently or not at all`;
          }
          j += 1;
        } else if (src[j] === '[' && src[j + 1] === ':') {
          return 'uses a POSIX class such as [:alpha:], which JavaScript does not support; write [a-z] instead';
        }
      }
      if (j >= src.length) return 'has an unterminated character class';
      i = j + 1;
      applyQuantifier();
      continue;
    }
    if (c === '(') {
      if (/^\(\?<?[=!]/.test(src.slice(i, i + 4))) {
        return 'uses lookahead or lookbehind, which Go RE2 (and so Reloader) does not support';
      }
      frames.push({ repeats: false, alternates: false });
      i += 1;
      continue;
    }
    if (c === ')') {
      if (frames.length === 1) return 'has an unbalanced ")"';
      const inner = frames.pop() as { repeats: boolean; alternates: boolean };
      i += 1;
      const q = applyQuantifier();
      if (q?.repeats && (inner.repeats || inner.alternates)) {
        return (
          'repeats a group that itself contains a repetition or an alternation, such as (a+)+ or (a|b)*; ' +
          'that can take exponential time. Use a character class, e.g. [ab]*, or list the names'
        );
      }
      const outer = top();
      outer.repeats ||= inner.repeats;
      outer.alternates ||= inner.alternates;
      continue;
    }
    if (c === '|') {
      top().alternates = true;
      i += 1;
      continue;
    }
    i += 1;
    applyQuantifier();
  }
  if (unbounded > MAX_UNBOUNDED_REPEATS) {
    return `has ${unbounded} unbounded repetitions (*, +, {n,}); at most ${MAX_UNBOUNDED_REPEATS} are allowed`;
  }
  return undefined;
}
