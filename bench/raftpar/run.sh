#!/usr/bin/env bash
# Experiment, not the product: the leader's log write in parallel with
# replication, on 3 nodes. hashicorp/raft's dispatchLogs writes the leader's
# log and only then wakes the replicators; dispatchlogs.patch (beside this
# script) puts the new entries in the log cache and wakes the replicators
# first, then writes, and still counts the leader towards the commit only
# after its own write. The script builds ticketbench twice, with hashicorp/raft
# as released and patched (a copy of the module and a temporary go.work
# that replaces it; the checkout is not changed), then alternates them:
#
#   bench/raftpar/run.sh
#
# and prints per run the client's pair and acquire p50 and, from the
# leader's timings, its log write, the replication round trip and dispatch
# to commit (p50 / p99, ms). On one machine the three servers share one disk,
# so the overlapped writes contend; the gain it measures is a lower bound.
#
# Environment (defaults in brackets): CLIENTS ["1 128"] REPS [3]
# DURATION [6s] WARMUP [3s] OUT [/tmp/raftpar-<date>]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
CLIENTS=${CLIENTS:-"1 128"} REPS=${REPS:-3} DURATION=${DURATION:-6s} WARMUP=${WARMUP:-3s}
OUT=${OUT:-/tmp/raftpar-$(date -u +%Y%m%dT%H%MZ)}
mkdir -p "$OUT/stock" "$OUT/par"
mod=$(cd server && go list -m -f '{{.Path}}@{{.Version}} {{.Dir}}' github.com/hashicorp/raft)
ver=${mod%% *} dir=${mod#* }
rm -rf "$OUT/raft" && cp -r "$dir" "$OUT/raft" && chmod -R u+w "$OUT/raft"
patch -s -d "$OUT/raft" -p1 < bench/raftpar/dispatchlogs.patch
cat > "$OUT/go.work" <<WORK
go 1.26.0

use (
	$root
	$root/fence/pgxfence
	$root/server
)

replace ${ver%@*} ${ver#*@} => $OUT/raft
WORK
go build -o "$OUT/stock/" ./server/cmd/ticketbench ./server/cmd/ticketd
GOWORK=$OUT/go.work go build -o "$OUT/par/" ./server/cmd/ticketbench ./server/cmd/ticketd

floor() { "$OUT/stock/ticketbench" -q -workload fsync -duration 5s 2>&1 | grep -o 'lat_ms p50=[0-9.]* p90=[0-9.]* p99=[0-9.]*\|other_cpu_cores=[0-9.]*' | tr '\n' ' '; echo; }
echo "fsync floor: $(floor)"
for pass in $(seq 1 "$REPS"); do
  for c in $CLIENTS; do
    for v in stock par; do
      t=$OUT/p$pass-$v-c$c
      load=$(cut -d' ' -f1 /proc/loadavg)
      line=$("$OUT/$v/ticketbench" -q -nodes 3 -clients "$c" -warmup "$WARMUP" -duration "$DURATION" -server-timings "$t.tim" 2>&1 | tail -1)
      echo "$line" > "$t.line"
      echo "== pass $pass $v clients $c load $load: $(echo "$line" | grep -o '([0-9.]*/s)\|lat_ms p50=[0-9.]*\|acq_ms p50=[0-9.]*\|server_cpu_cores=[0-9.]*\|other_cpu_cores=[0-9.]*' | tr '\n' ' ')"
      leader=$(grep -l '^core.total' "$t.tim".* | head -1)
      awk '$1 == "raft.leader.dispatchLog" || $1 == "raft.replication.appendEntries.rpc" || $1 == "raft.commitTime" { printf "  %-40s %s %s\n", $1, $3, $5 }' "$leader"
    done
  done
done
echo "fsync floor: $(floor)"
echo "files in $OUT"
