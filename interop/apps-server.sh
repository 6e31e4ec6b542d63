#!/usr/bin/env bash
# Installs @modelcontextprotocol/server-basic-vanillajs, the MCP Apps example server of the
# ext-apps repository, into a cache directory, once, and prints the path of its entry point
# (dist/index.js). The interop tests run it with
#   node <entry> --stdio
# (without --stdio it listens on 0.0.0.0, which the tests never ask for).
# Usage: bash apps-server.sh [version]   (default: APPS_SERVER_VERSION or 2.0.3)
set -euo pipefail

version="${1:-${APPS_SERVER_VERSION:-2.0.3}}"
pkg="@modelcontextprotocol/server-basic-vanillajs"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/mcpclient-interop/basic-vanillajs-${version}"
entry="$dir/node_modules/$pkg/dist/index.js"

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "apps-server.sh: $tool not found in PATH" >&2
		exit 2
	fi
done

if [ ! -f "$entry" ]; then
	mkdir -p "$dir"
	# Install into a temporary directory and move it in place, so that an interrupted install
	# never leaves a half-populated cache behind.
	tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	printf '{"name":"mcpclient-interop-apps","private":true}\n' >"$tmp/package.json"
	if ! npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error --save-exact \
		"$pkg@$version" >&2; then
		echo "apps-server.sh: npm install $pkg@$version failed" >&2
		exit 1
	fi
	if [ ! -f "$tmp/node_modules/$pkg/dist/index.js" ]; then
		echo "apps-server.sh: $pkg@$version installed without dist/index.js" >&2
		exit 1
	fi
	rm -rf "$dir"
	mv "$tmp" "$dir"
	trap - EXIT
fi

echo "$entry"
