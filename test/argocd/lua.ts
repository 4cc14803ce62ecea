// Runs Argo CD resource-action Lua on gopher-lua, the Lua VM Argo CD embeds (built from its Go
// module at the version Argo CD pins, test/cluster/go/lua), the way Argo CD does: the object is the
// global `obj`, the script's return value is the result. Objects cross as JSON: a Lua literal in, a
// small JSON encoder out. The unit project's global setup (test/unit-setup.ts) builds the runner.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { clusterPaths } from '../cluster/paths.ts';

/** The gopher-lua runner in .cluster/bin; throws (never skips) when it has not been built. */
export function luaInterpreter(bin = clusterPaths().bin): string {
  const runner = path.join(bin, 'gopher-lua');
  if (!existsSync(runner)) {
    throw new Error(
      `${runner} not found: the Lua checks run on gopher-lua, built from test/cluster/go/lua by the unit tests' global setup (npm run test:unit) or by npm run cluster -- build`,
    );
  }
  return runner;
}

function luaString(s: string): string {
  let out = '"';
  for (const b of Buffer.from(s, 'utf8')) {
    const printable = b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c;
    out += printable ? String.fromCharCode(b) : `\\${String(b).padStart(3, '0')}`;
  }
  return `${out}"`;
}

/** A JSON value as a Lua table constructor; empty arrays are marked so they come back as []. */
export function toLua(v: unknown): string {
  if (v === null || v === undefined) return 'nil';
  if (typeof v === 'string') return luaString(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return v.length === 0 ? '__array({})' : `{${v.map(toLua).join(', ')}}`;
  const entries = Object.entries(v as Record<string, unknown>).filter(
    ([, x]) => x !== null && x !== undefined,
  );
  return `{${entries.map(([k, x]) => `[${luaString(k)}] = ${toLua(x)}`).join(', ')}}`;
}

const PRELUDE = `
local __ARRAY = {}
function __array(t) return setmetatable(t, __ARRAY) end
local function __encode(v)
  local t = type(v)
  if t == "nil" then return "null" end
  if t == "boolean" then return tostring(v) end
  if t == "number" then
    if v == math.floor(v) and v > -2^53 and v < 2^53 then return string.format("%d", v) end
    return string.format("%.17g", v)
  end
  if t == "string" then
    return '"' .. v:gsub('[%c"\\\\]', function(c) return string.format("\\\\u%04x", c:byte()) end) .. '"'
  end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  if getmetatable(v) == __ARRAY or (n > 0 and #v == n) then
    local parts = {}
    for i = 1, #v do parts[i] = __encode(v[i]) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = __encode(k) .. ":" .. __encode(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end
`;

/** Runs `script` with `obj` bound, returns what it returns (as JSON). */
export async function runLua(script: string, obj: unknown, interpreter = luaInterpreter()): Promise<unknown> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-lua-'));
  const file = path.join(dir, 'run.lua');
  try {
    await writeFile(
      file,
      `${PRELUDE}\nobj = ${toLua(obj)}\nlocal function __script()\n${script}\nend\nio.write(__encode(__script()))\n`,
    );
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(interpreter, [file], (err, out, errOut) =>
        err ? reject(new Error(`${interpreter} failed: ${errOut || err.message}`)) : resolve(out),
      ),
    );
    return JSON.parse(stdout);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** JSON with object keys sorted, for comparing values whatever their key order. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** RFC 7386 merge patch from `before` to `after`, as Argo CD computes for an action's result. */
export function mergePatch(before: unknown, after: unknown): unknown {
  const isObj = (x: unknown): x is Record<string, unknown> =>
    typeof x === 'object' && x !== null && !Array.isArray(x);
  if (!isObj(before) || !isObj(after)) return after;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(before)) if (!(k in after)) out[k] = null;
  for (const [k, v] of Object.entries(after)) {
    const b = before[k];
    if (canonical(b) === canonical(v)) continue;
    out[k] = isObj(b) && isObj(v) ? mergePatch(b, v) : v;
  }
  return out;
}
