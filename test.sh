#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run). Needs Go; PostgreSQL 15
# binaries (initdb, pg_ctl, postgres) on the PATH for the fence tests.
set -euo pipefail
cd "$(dirname "$0")"

echo "== go vet"
go vet ./...

echo "== tests (race detector on)"
go test -race -count=1 -timeout 20m ./...

echo "== fuzzers, briefly (corpus in each package's testdata/fuzz)"
fuzz() { go test -run '^$' -fuzz "^$2\$" -fuzztime "${FUZZTIME:-5s}" "$1"; }
fuzz ./internal/wire FuzzDecode
fuzz ./internal/fsm FuzzDecodeBatch
fuzz ./internal/fsm FuzzReadSnapshot
fuzz ./cmd/ticketd FuzzLoadConfigFile

echo "== benchmarks, once each (they must still run; timings are not checked)"
go test -run '^$' -bench . -benchtime 1x ./... > /dev/null

echo "== all passed"
