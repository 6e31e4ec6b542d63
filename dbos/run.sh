#!/usr/bin/env bash
# Vets and tests the DBOS module. DBOS keeps its workflows in PostgreSQL: the tests start a
# throwaway server of their own from the local binaries (see internal/pgtest), so this installs
# Debian's postgresql package first when no initdb is found (that needs root, as CI runs). Set
# MCPCLIENT_PG_URL to test against a server of your own instead.
set -euo pipefail
cd "$(dirname "$0")"

if [ -z "${MCPCLIENT_PG_URL:-}" ] && [ -z "${MCPCLIENT_PG_BIN:-}" ] \
	&& ! command -v initdb >/dev/null && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
	echo "dbos: installing postgresql"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq postgresql >/dev/null
fi

go mod tidy -diff || { echo "go mod tidy would change dbos"; exit 1; }
go vet ./...
go test -race -count=1 ./...
