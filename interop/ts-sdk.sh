#!/usr/bin/env bash
# Installs the TypeScript SDK v2 server package, @modelcontextprotocol/server, into a cache
# directory, once, and prints that directory. The interop tests run testdata/ts-sdk-server.mjs
# against it:
#   node testdata/ts-sdk-server.mjs <dir> stdio | http <port> [auto|json|sse]
# zod, which the server script needs for its schemas, is installed at the version the SDK
# itself depends on (npm hoists it), so the two never disagree.
# Usage: bash ts-sdk.sh [version]   (default: TS_SDK_VERSION or 2.4.0)
set -euo pipefail

version="${1:-${TS_SDK_VERSION:-2.4.0}}"
pkg="@modelcontextprotocol/server"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/mcpclient-interop/ts-sdk-${version}"
entries=("$pkg/dist/index.mjs" "$pkg/dist/stdio.mjs" "zod/index.js")

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ts-sdk.sh: $tool not found in PATH" >&2
		exit 2
	fi
done

complete() {
	for e in "${entries[@]}"; do
		[ -f "$1/node_modules/$e" ] || return 1
	done
}

if ! complete "$dir"; then
	mkdir -p "$(dirname "$dir")"
	# Install into a temporary directory and move it in place, so that an interrupted install
	# never leaves a half-populated cache behind.
	tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	printf '{"name":"mcpclient-interop-ts-sdk","private":true}\n' >"$tmp/package.json"
	if ! npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error --save-exact \
		"$pkg@$version" >&2; then
		echo "ts-sdk.sh: npm install $pkg@$version failed" >&2
		exit 1
	fi
	if ! complete "$tmp"; then
		echo "ts-sdk.sh: $pkg@$version installed without one of ${entries[*]}" >&2
		exit 1
	fi
	rm -rf "$dir"
	mv "$tmp" "$dir"
	trap - EXIT
fi

echo "$dir"
