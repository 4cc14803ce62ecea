// Every flag of the service in one table: name, type, default and help. Flags can also be set as
// environment variables (GITOPS_RELOADER_<NAME>, e.g. GITOPS_RELOADER_DEBOUNCE=5s); a flag on the
// command line wins over the environment. Values are validated once, here, and a bad one stops
// start-up with a message that names the flag and the value.
import { parseArgs } from 'node:util';
import { parseDuration } from '../core/duration.ts';

type FlagType = 'string' | 'list' | 'duration' | 'int' | 'bool' | 'enum';

export interface FlagSpec {
  name: string;
  type: FlagType;
  help: string;
  default?: string;
  values?: readonly string[];
  /** Smallest allowed value (int, duration in ms). */
  min?: number;
}

export class FlagError extends Error {
  override name = 'FlagError';
}

export function envName(flag: string): string {
  return `GITOPS_RELOADER_${flag.toUpperCase().replace(/-/g, '_')}`;
}

export type FlagValue = string | string[] | number | boolean | undefined;

function convert(spec: FlagSpec, raw: string, source: string): FlagValue {
  const bad = (why: string) =>
    new FlagError(`invalid value ${JSON.stringify(raw)} for --${spec.name} (${source}): ${why}`);
  switch (spec.type) {
    case 'string':
      return raw;
    case 'list':
      return raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
    case 'duration': {
      const ms = parseDuration(raw);
      if (ms === undefined) throw bad('expected a duration such as 500ms, 3s, 1m30s');
      if (spec.min !== undefined && ms < spec.min) throw bad(`must be at least ${spec.min}ms`);
      return ms;
    }
    case 'int': {
      if (!/^-?\d+$/.test(raw.trim())) throw bad('expected a whole number');
      const n = Number(raw);
      if (spec.min !== undefined && n < spec.min) throw bad(`must be at least ${spec.min}`);
      return n;
    }
    case 'bool':
      // Go's strconv.ParseBool spellings too (t, f), as Reloader's flags take them.
      if (/^(true|1|yes|t)$/i.test(raw)) return true;
      if (/^(false|0|no|f)$/i.test(raw)) return false;
      throw bad('expected true or false');
    case 'enum':
      if (!spec.values?.includes(raw)) throw bad(`expected one of ${spec.values?.join(', ')}`);
      return raw;
  }
}

/**
 * Parses argv and env against `specs`. Returns the value of every flag (its default when unset)
 * and the positional arguments. Unknown flags are an error.
 */
export function parseFlags(
  specs: readonly FlagSpec[],
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): { values: Record<string, FlagValue>; positionals: string[]; explicit: Set<string> } {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const s of specs) options[s.name] = { type: 'string', multiple: s.type === 'list' };
  let parsed: ReturnType<typeof parseArgs>;
  // Booleans are written --dry-run or --dry-run=false; normalise the bare form before parsing.
  const bools = new Set(specs.filter((s) => s.type === 'bool').map((s) => `--${s.name}`));
  const args = argv.map((a) => (bools.has(a) ? `${a}=true` : a));
  try {
    parsed = parseArgs({ args, options, strict: true, allowPositionals: true });
  } catch (err) {
    throw new FlagError((err as Error).message.replace(/^Unknown option '(.*)'.*$/s, 'unknown flag $1'));
  }
  const values: Record<string, FlagValue> = {};
  /** Flags given on the command line or in the environment, as opposed to defaults. */
  const explicit = new Set<string>();
  for (const s of specs) {
    const fromArgv = parsed.values[s.name];
    const fromEnv = env[envName(s.name)];
    let v: FlagValue;
    if (fromArgv !== undefined) {
      const raw = Array.isArray(fromArgv) ? fromArgv.map(String).join(',') : String(fromArgv);
      v = convert(s, raw, 'flag');
      explicit.add(s.name);
    } else if (fromEnv !== undefined && fromEnv !== '') {
      v = convert(s, fromEnv, `env ${envName(s.name)}`);
      explicit.add(s.name);
    } else if (s.default !== undefined) {
      v = convert(s, s.default, 'default');
    }
    values[s.name] = v;
  }
  return { values, positionals: parsed.positionals, explicit };
}

export function usage(specs: readonly FlagSpec[]): string {
  return specs
    .map((s) => {
      const kind = s.type === 'enum' ? (s.values ?? []).join('|') : s.type;
      const def = s.default !== undefined ? ` (default ${JSON.stringify(s.default)})` : '';
      return `  --${s.name} <${kind}>\n      ${s.help}${def}\n      env: ${envName(s.name)}`;
    })
    .join('\n');
}
