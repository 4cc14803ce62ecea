// Every flag of the service in one table: name, type, default and help. Flags can also be set as
// environment variables (GITOPS_RELOADER_<NAME>, e.g. GITOPS_RELOADER_DEBOUNCE=5s); a flag on the
// command line wins over the environment. Values are validated once, here, and a bad one stops
// start-up with a message that names the flag and the value.
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
 * Splits argv into flag values and positionals. Our own small parser rather than node:util's
 * parseArgs, so that every error is a sentence of ours naming the flag (parseArgs' messages are
 * long, mention options it does not know we call flags, and were cut off mid-sentence by callers).
 * Accepted: --name=value, --name value, bare --bool, and `--` ending the flags.
 */
function tokenize(
  specs: readonly FlagSpec[],
  argv: readonly string[],
): { values: Record<string, string[]>; positionals: string[] } {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const values: Record<string, string[]> = {};
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    // A lone '-' is a positional (stdin, for checksum).
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    if (!arg.startsWith('--')) {
      throw new FlagError(`unknown flag ${arg}: flags are written with two dashes, as in --${arg.slice(1)}`);
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const spec = byName.get(name);
    if (!spec) throw new FlagError(`unknown flag --${name}`);
    let raw: string;
    if (eq >= 0) raw = arg.slice(eq + 1);
    else if (spec.type === 'bool') raw = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined || (next.startsWith('-') && next !== '-')) {
        const hint = next === undefined ? '' : ` (write --${name}=VALUE for a value that starts with -)`;
        throw new FlagError(`flag --${name} needs a value${hint}`);
      }
      raw = next;
      i++;
    }
    // A list flag collects every occurrence; any other flag given twice takes the last, as Go's flag does.
    values[name] = spec.type === 'list' ? [...(values[name] ?? []), raw] : [raw];
  }
  return { values, positionals };
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
  const parsed = tokenize(specs, argv);
  const values: Record<string, FlagValue> = {};
  /** Flags given on the command line or in the environment, as opposed to defaults. */
  const explicit = new Set<string>();
  for (const s of specs) {
    const fromArgv = parsed.values[s.name];
    const fromEnv = env[envName(s.name)];
    let v: FlagValue;
    if (fromArgv !== undefined) {
      const raw = fromArgv.join(',');
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
