#!/usr/bin/env bash
# Installs @modelcontextprotocol/server-basic-vanillajs, the MCP Apps example server of the
# ext-apps repository, into a cache directory, once, and prints the path of its entry point
# (dist/index.js). The interop tests run it with
#   node <entry> --stdio
# (without --stdio it listens on 0.0.0.0, which the tests never ask for).
# Usage: bash apps-server.sh [version]   (default: APPS_SERVER_VERSION or 2.0.3)
set -euo pipefail
cd "$(dirname "$0")"

version="${1:-${APPS_SERVER_VERSION:-2.0.3}}"
pkg="@modelcontextprotocol/server-basic-vanillajs"
dir="$(bash npm-cache.sh basic-vanillajs "$pkg" "$version" "$pkg/dist/index.js")"
echo "$dir/node_modules/$pkg/dist/index.js"
