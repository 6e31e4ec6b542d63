#!/usr/bin/env bash
# Installs @modelcontextprotocol/server-everything into a cache directory, once, and prints the
# path of its entry point (dist/index.js). The interop tests run it with
#   node <entry> stdio|streamableHttp|sse
# Usage: bash everything.sh [version]   (default: EVERYTHING_VERSION or 2026.8.31)
set -euo pipefail
cd "$(dirname "$0")"

version="${1:-${EVERYTHING_VERSION:-2026.8.31}}"
pkg="@modelcontextprotocol/server-everything"
dir="$(bash npm-cache.sh everything "$pkg" "$version" "$pkg/dist/index.js")"
echo "$dir/node_modules/$pkg/dist/index.js"
