# Sourced by conformance/run.sh and conformance/run-server.sh: installs the official MCP
# conformance suite (@modelcontextprotocol/conformance@$CONFORMANCE_VERSION) into ~/.cache (or
# $XDG_CACHE_HOME) on first use, and defines `suite ARGS...`, which runs its CLI.
# The caller sets WORK, a scratch directory it removes at exit.

VERSION="${CONFORMANCE_VERSION:-0.2.0-alpha.12}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/mcpclient-conformance-$VERSION"
CLI="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js"

command -v node >/dev/null && command -v npm >/dev/null || { echo "conformance: needs node and npm" >&2; exit 2; }
if [[ ! -f "$CLI" ]]; then
  echo "conformance: installing @modelcontextprotocol/conformance@$VERSION into $CACHE" >&2
  mkdir -p "$CACHE"
  (cd "$CACHE" && { [[ -f package.json ]] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund "@modelcontextprotocol/conformance@$VERSION" >/dev/null 2>&1) ||
    { echo "conformance: npm install failed" >&2; exit 2; }
fi

# The suite declares Node >= 22 only for fs.globSync, which no scenario uses: on older Node,
# hand its modules an fs with a stub in its place.
NODE_ARGS=()
if (( $(node -p 'process.versions.node.split(".")[0]') < 22 )); then
  cat >"$WORK/fs.mjs" <<'JS'
export * from 'node:fs';
import fs from 'node:fs';
export default fs;
export function globSync() { throw new Error('fs.globSync needs Node >= 22'); }
JS
  cat >"$WORK/hooks.mjs" <<'JS'
const stub = new URL('./fs.mjs', import.meta.url).href;
export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes('/@modelcontextprotocol/conformance/')) {
    return { url: stub, shortCircuit: true };
  }
  return next(specifier, context);
}
JS
  echo "import { register } from 'node:module'; register('./hooks.mjs', import.meta.url);" >"$WORK/register.mjs"
  NODE_ARGS=(--import "$WORK/register.mjs")
fi
suite() { node "${NODE_ARGS[@]}" "$CLI" "$@"; }
