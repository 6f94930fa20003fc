#!/usr/bin/env bash
# Idle connections: what the server spends on connections that hold
# nothing, wait for nothing and have nothing in flight.
#
#   bench/idle.sh                      # this checkout, 18,000 idle connections, 1 and 3 nodes
#   BEFORE=/path/to/old/ticketd bench/idle.sh   # and a before/after pair at N_PAIR connections
#
# Builds ticketd and ticketbench from this checkout, then for each node
# count runs `ticketbench -workload connections` on fresh servers: the
# servers' CPU over WINDOW with no load, then N idle Brokers (one connection
# each, dialed from SOURCE_IPS addresses 127.0.0.2 on, so that source ports
# never run out), the servers' CPU over WINDOW again with only them, then
# 4 workers of acquire/release beside them. Prints one line per run: server
# CPU per idle connection per second, RSS per idle connection, the acquire
# p99 with the idle connections, and the other load on the machine while
# the workers ran. With BEFORE, each node count also runs BEFORE's ticketd
# and this checkout's side by side at N_PAIR connections (an older server
# pings every connection every 500 ms; 18,000 of those do not fit beside
# the generator on 2 busy cores).
#
# Environment (defaults in brackets): N [18000] WINDOW [45s] (longer than
# the 20 s idle ping interval) NODES ["1 3"] SOURCE_IPS [64] BEFORE []
# N_PAIR [4000] OUT [bench/compare/results/idle-<date>.jsonl]
# RLIMIT_NOFILE must allow N + 1024 in the generator and in the leader.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-18000}
WINDOW=${WINDOW:-45s}
NODES=${NODES:-1 3}
SOURCE_IPS=${SOURCE_IPS:-64}
N_PAIR=${N_PAIR:-4000}
BEFORE=${BEFORE:-}
OUT=${OUT:-bench/compare/results/idle-$(date -u +%Y%m%dT%H%MZ).jsonl}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" ./server/cmd/ticketbench ./server/cmd/ticketd

run() { # tag nodes ticketd n
  local line
  line=$("$bin/ticketbench" -q -json -workload connections -nodes "$2" -n "$4" -idle-window "$WINDOW" \
    -source-ips "$SOURCE_IPS" -duration 10s -warmup 2s -ticketd "$3")
  echo "$1 $line" >>"$OUT"
  echo "$line" | python3 -c '
import json, re, sys
tag, d = sys.argv[1], json.load(sys.stdin)
n = dict(re.findall(r"(\w+)=([\d.]+)", d["notes"]))
print("%-10s nodes=%d n=%s cpu_us_per_conn_s=%s rss_per_conn_b=%s acquire_p99_ms=%s other_cpu_cores=%s" % (
    tag, d["nodes"], n["n"], n["idle_cpu_us_per_conn_s"], n["rss_per_conn_b"], d["acquire_latency_ms"]["p99"], n.get("other_cpu_cores", "?")))' "$1"
}

for nodes in $NODES; do
  run "after" "$nodes" "$bin/ticketd" "$N"
  if [ -n "$BEFORE" ]; then
    run "before-$N_PAIR" "$nodes" "$BEFORE" "$N_PAIR"
    run "after-$N_PAIR" "$nodes" "$bin/ticketd" "$N_PAIR"
  fi
done
echo "results: $OUT"
