#!/usr/bin/env bash
# Vets and tests the Temporal module. Its tests run Temporal's test environment in process (no
# Temporal server) against mcptest servers.
set -euo pipefail
cd "$(dirname "$0")"

go mod tidy -diff || { echo "go mod tidy would change temporal"; exit 1; }
go vet ./...
go test -race -count=1 ./...
