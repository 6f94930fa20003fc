#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run). Needs Go; PostgreSQL 15
# binaries (initdb, pg_ctl, postgres) on the PATH for the fence tests.
set -euo pipefail
cd "$(dirname "$0")"

# The nemesis test (internal/nemesis) puts servers in network namespaces: it
# needs root and iproute2's ip.
if ! command -v ip >/dev/null 2>&1; then
  echo "== installing iproute2 (ip, for the nemesis test)"
  apt-get update -qq && apt-get install -y -qq iproute2
fi

echo "== go vet"
go vet ./...

echo "== tests (race detector on)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Verbose into a file, so that every test and subtest is counted; the
# package lines go to the terminal.
status=0
go test -race -count=1 -timeout 20m -v ./... >"$log" 2>&1 || status=$?
grep -E '^(ok|FAIL|panic:)' "$log" || true
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
echo "tests: $passed passed, $failed failed"
if [ "$status" -ne 0 ]; then
  echo "== go test failed (exit $status); the failing packages again, without -v:"
  pkgs=$(grep -E '^FAIL\s+\S+' "$log" | awk '{print $2}' | sort -u)
  [ -n "$pkgs" ] && go test -race -count=1 -timeout 20m $pkgs || true
  exit "$status"
fi

echo "== fuzzers, briefly (corpus in each package's testdata/fuzz)"
fuzz() { go test -run '^$' -fuzz "^$2\$" -fuzztime "${FUZZTIME:-5s}" "$1"; }
fuzz ./internal/wire FuzzDecode
fuzz ./internal/fsm FuzzDecodeBatch
fuzz ./internal/fsm FuzzReadSnapshot
fuzz ./cmd/ticketd FuzzLoadConfigFile

echo "== benchmarks, once each (they must still run; timings are not checked)"
go test -run '^$' -bench . -benchtime 1x ./... > /dev/null

echo "== all passed"
echo "tests: $passed passed, 0 failed"
