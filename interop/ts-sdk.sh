#!/usr/bin/env bash
# Installs the TypeScript SDK v2 server package, @modelcontextprotocol/server, into a cache
# directory, once, and prints that directory. The interop tests run testdata/ts-sdk-server.mjs
# against it:
#   node testdata/ts-sdk-server.mjs <dir> stdio | http <port> [auto|json|sse]
#   node testdata/ts-sdk-tasks-server.mjs <dir> <port>
# zod, which the server script needs for its schemas, is installed at the version the SDK
# itself depends on (npm hoists it), so the two never disagree.
# Usage: bash ts-sdk.sh [version]   (default: TS_SDK_VERSION or 2.4.0)
set -euo pipefail
cd "$(dirname "$0")"

version="${1:-${TS_SDK_VERSION:-2.4.0}}"
pkg="@modelcontextprotocol/server"
bash npm-cache.sh ts-sdk "$pkg" "$version" "$pkg/dist/index.mjs" "$pkg/dist/stdio.mjs" "zod/index.js"
