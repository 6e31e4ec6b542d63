#!/usr/bin/env bash
# Installs an npm package into a cache directory of its own, once, and prints that directory.
# Usage: bash npm-cache.sh NAME PACKAGE VERSION FILE...
# The directory is ${XDG_CACHE_HOME:-$HOME/.cache}/mcpclient-interop/NAME-VERSION; the install
# counts as done when every FILE (a path under its node_modules) is there. It installs into a
# temporary directory and moves it in place, so that an interrupted install never leaves a
# half-populated cache behind. Exit status 2: node or npm missing; 1: the install failed.
set -euo pipefail

name="$1" pkg="$2" version="$3"
shift 3
files=("$@")
dir="${XDG_CACHE_HOME:-$HOME/.cache}/mcpclient-interop/${name}-${version}"

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "$name: $tool not found in PATH" >&2
		exit 2
	fi
done

complete() {
	for f in "${files[@]}"; do
		[ -f "$1/node_modules/$f" ] || return 1
	done
}

if ! complete "$dir"; then
	mkdir -p "$(dirname "$dir")"
	tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	printf '{"name":"mcpclient-interop-%s","private":true}\n' "$name" >"$tmp/package.json"
	if ! npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error --save-exact \
		"$pkg@$version" >&2; then
		echo "$name: npm install $pkg@$version failed" >&2
		exit 1
	fi
	if ! complete "$tmp"; then
		echo "$name: $pkg@$version installed without one of ${files[*]}" >&2
		exit 1
	fi
	rm -rf "$dir"
	mv "$tmp" "$dir"
	trap - EXIT
fi

echo "$dir"
