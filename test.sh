#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run): every test in every
# language. Needs Go and PostgreSQL 15 binaries (initdb, pg_ctl, postgres);
# installs from Debian what a fresh machine lacks (mariadb-server for the
# MySQL fence tests, Mono and NUnit for the C# client, iproute2 for the fault
# tests, chromium for the console's browser tests, prometheus for promtool).
# Ends with one line "tests: N passed, N failed" over all languages.
set -euo pipefail
cd "$(dirname "$0")"

# Unresolved merge conflicts: lines that are exactly git's markers, in any
# tracked file (a Markdown setext underline of another length is fine).
echo "== merge-conflict markers"
conflict_rc=0
conflicts=$(git grep -nE '^(<<<<<<<|>>>>>>>)( |$)|^=======$') || conflict_rc=$?
case $conflict_rc in
  0) printf 'unresolved merge-conflict markers in tracked files:\n%s\n' "$conflicts" >&2; exit 1 ;;
  1) ;; # none
  *) echo "git grep failed (exit $conflict_rc): run the tests from a git checkout" >&2; exit 1 ;;
esac

# apt-get update once, and only when something has to be installed.
apt_updated=
need() { # need PACKAGE... : install with apt-get
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# The MySQL dialect's tests start a throwaway MariaDB (server/internal/testsupport/mysqltest)
# unless TICKETING_TEST_MYSQL_DSN names a server; they never skip, so the
# server binaries must be here.
if [ -z "${TICKETING_TEST_MYSQL_DSN:-}" ] && ! PATH="$PATH:/usr/sbin" command -v mariadbd >/dev/null && ! PATH="$PATH:/usr/sbin" command -v mysqld >/dev/null; then
  echo "== installing mariadb-server (for the MySQL dialect's tests)"
  need mariadb-server
fi

# The nemesis test (server/internal/testsupport/nemesis) puts servers in network namespaces: it
# needs root and iproute2's ip and tc.
if ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
  echo "== installing iproute2 (ip and tc, for the nemesis test)"
  need iproute2
fi

# The operator's console is tested in Debian's headless Chromium
# (server/internal/testsupport/consoletest), and the alert rules with Prometheus's
# promtool and in a real Prometheus scraping test clusters (both from
# Debian's prometheus package).
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (for the console's browser tests)"
  need chromium
fi
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  echo "== installing prometheus (prometheus and promtool, for the alert rules)"
  need prometheus
fi

# The Redis benchmark driver (bench/redis) is tested against a real
# redis-server, Debian's package; its test never skips.
if ! command -v redis-server >/dev/null 2>&1; then
  echo "== installing redis-server (for the Redis benchmark driver's test)"
  need redis-server
fi

# Every Go module of the checkout, through go.work: the client module (the
# root), the native-pgx fence module and the server module (ticketd, tools
# and every end-to-end, crash and fault test).
GO_PKGS="./... ./fence/pgxfence/... ./server/..."

echo "== go vet"
go vet $GO_PKGS

# golangci-lint (configuration: .golangci.yml), pinned; installed into
# GOPATH/bin when that version is not there.
GOLANGCI_LINT_VERSION=v2.15.0
golangci_lint="$(go env GOPATH)/bin/golangci-lint"
if ! "$golangci_lint" version 2>/dev/null | grep -q "version ${GOLANGCI_LINT_VERSION#v} "; then
  echo "== installing golangci-lint $GOLANGCI_LINT_VERSION"
  GOBIN="$(go env GOPATH)/bin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
fi
echo "== golangci-lint"
"$golangci_lint" run $GO_PKGS
for m in bench/redis bench/multigroup; do # modules outside go.work
  (cd "$m" && GOWORK=off "$golangci_lint" run --config ../../.golangci.yml ./...)
done

echo "== alert rules (promtool check rules, promtool test rules)"
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml

echo "== Go tests (race detector on)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Verbose into a file, so that every test and subtest is counted; the
# package lines go to the terminal.
status=0
go test -race -count=1 -timeout 25m -v $GO_PKGS >"$log" 2>&1 || status=$?
# The small benchmark modules kept out of go.work so that their dependencies
# (go-redis, raft-wal) never reach the client or server modules. bench/etcd
# is left to its own README (it builds etcd and runs for minutes).
for m in bench/redis bench/multigroup; do
  (cd "$m" && GOWORK=off go vet ./... && GOWORK=off go test -race -count=1 -timeout 10m -v ./...) >>"$log" 2>&1 || status=$?
done
grep -E '^(ok|FAIL|panic:)' "$log" || true
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
echo "go: $passed passed, $failed failed"
if [ "$status" -ne 0 ]; then
  echo "== go test failed (exit $status); what the failing tests printed:"
  # The lines before each --- FAIL (go test -v streams a test's log as it
  # runs), so a failure that does not repeat on the rerun is still explained.
  grep -B 40 -E '^\s*--- FAIL' "$log" | head -600
  echo "== the failing packages again, without -v:"
  pkgs=$(grep -E '^FAIL\s+\S+' "$log" | awk '{print $2}' | sort -u)
  [ -n "$pkgs" ] && go test -race -count=1 -timeout 20m $pkgs || true
  [ "$failed" -eq 0 ] && failed=1
  echo "tests: $passed passed, $failed failed"
  exit "$status"
fi

echo "== fuzzers, briefly (corpus in each package's testdata/fuzz)"
# A count of executions, not a duration: Go 1.26's fuzz coordinator can fail
# a target with a bare "context deadline exceeded" when a duration ends while
# a worker is busy on a loaded machine (golang/go#75804, fixed in Go 1.27).
# The third argument sizes a slow target's count; FUZZTIME=1000000x (or 30s)
# fuzzes every target longer.
fuzz() { go test -run '^$' -fuzz "^$2\$" -fuzztime "${FUZZTIME:-${3:-50000x}}" "$1"; }
fuzz ./internal/wire FuzzDecode
fuzz ./server/internal/fsm FuzzDecodeBatch
fuzz ./server/internal/fsm FuzzReadSnapshot
fuzz ./server/cmd/ticketd FuzzLoadConfigFile 20000x
fuzz ./server/internal/node FuzzReadHandshake
fuzz ./server/internal/node FuzzReadAnswer
fuzz ./server/internal/logstore FuzzDecodeEntry
fuzz ./server/internal/logstore FuzzScanTail 20000x
fuzz ./internal/wire FuzzDecodeCoord
fuzz ./internal/wire FuzzDecodeReplies
fuzz ./internal/wire FuzzReaderCoordFrames
fuzz ./internal/adminwire FuzzDecodeRequest
fuzz ./server/internal/fsm FuzzDecodeCoordBatch
fuzz ./server/internal/fsm FuzzReadCoordSnapshot
fuzz ./server/internal/server FuzzConsoleToken

echo "== benchmarks, once each (they must still run; timings are not checked)"
go test -run '^$' -bench . -benchtime 1x $GO_PKGS > /dev/null

# The other languages' suites each build ticketd from this checkout, test
# against real servers and end with "LANG: N passed, N failed".
other() { # other NAME SCRIPT
  local out st=0 line
  out=$(mktemp)
  echo "== $1 client"
  bash "$2" 2>&1 | tee "$out" || st=$?
  # -o: Maven may put colour escapes before the line.
  line=$(grep -oE "$1: [0-9]+ passed, [0-9]+ failed" "$out" | tail -n1 || true)
  rm -f "$out"
  if [ -z "$line" ]; then
    echo "$1: the suite printed no result line (exit $st)"
    failed=$((failed + 1))
    return
  fi
  passed=$((passed + $(echo "$line" | sed -E 's/^[a-z]+: ([0-9]+) passed.*/\1/')))
  failed=$((failed + $(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')))
  if [ "$st" -ne 0 ] && [ "$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')" -eq 0 ]; then
    failed=$((failed + 1))
  fi
}
for lang in java csharp; do
  if [ -f "clients/$lang/test.sh" ]; then other "$lang" "clients/$lang/test.sh"; fi
done

if [ "$failed" -ne 0 ]; then
  echo "== FAILED"
  echo "tests: $passed passed, $failed failed"
  exit 1
fi
echo "== all passed"
echo "tests: $passed passed, 0 failed"
