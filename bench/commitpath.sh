#!/usr/bin/env bash
# The commit path's breakdown: where one commit's time goes between the
# request's receipt and its answer, for one client and for 128 workers.
#
#   bench/commitpath.sh
#
# Builds ticketbench and ticketd, measures the disk floor (one 4 KiB append
# and fdatasync, ticketbench -workload fsync), then runs ticketbench with
# -server-timings (the server in a ticketbench child that records Raft's
# timings and the core's stage trace) for every client count, node count and
# in-flight bound, REPS passes interleaved so that a busy moment of a shared
# machine falls on all of them alike. Per run it prints the client's pair
# and acquire p50, the load average, the other processes' CPU, and p50/p99
# of every stage (ms), in the order a commit passes them:
#   core.gather       receipt (decoded by the connection's reader) to sealed
#   core.propose      sealed to accepted by Raft
#   raft.leader.dispatchLog   the leader's log write (the fdatasync)
#   raft.commitTime           dispatch to commit (3 nodes: the replication)
#   raft.fsm.enqueue, raft.fsm.apply   to the state machine, and applied
#   core.commit_apply accepted by Raft to its future's return
#   core.result       the future's return to the core taking the outcome
#   core.answer       the core queueing the batch's answers
#   core.total        receipt to answered; the client's acquire minus this
#                     is the client library, loopback both ways, and the
#                     connection's reader before and writer after the core
#
# Environment (defaults in brackets):
#   CLIENTS ["1 128"]  NODES ["1"]  INFLIGHT ["4"] (the core's batches in
#   flight; 4 is ticketd's) REPS [2]  DURATION [6s]  WARMUP [3s]
#   OUT [/tmp/commitpath-<date>]  where the timing files are kept
#   BEFORE [none]  a git revision to compare with: it is built from a
#                  detached worktree and every run is made with both builds,
#                  before then after, so each pair shares the machine's
#                  moment (bench/commitpath.sh with BEFORE=<rev> is how the
#                  before/after breakdown in docs/benchmarks.md was made)
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-"1 128"} NODES=${NODES:-1} INFLIGHT=${INFLIGHT:-4}
REPS=${REPS:-2} DURATION=${DURATION:-6s} WARMUP=${WARMUP:-3s}
OUT=${OUT:-/tmp/commitpath-$(date -u +%Y%m%dT%H%MZ)}
mkdir -p "$OUT/bin"
go build -o "$OUT/bin/" ./server/cmd/ticketbench ./server/cmd/ticketd
builds="after=$OUT/bin/ticketbench"
if [ -n "${BEFORE:-}" ]; then
  src=$OUT/before-src
  git worktree add -q --detach "$src" "$BEFORE"
  trap 'git worktree remove --force "$src"' EXIT
  mkdir -p "$OUT/before-bin"
  (cd "$src" && go build -o "$OUT/before-bin/" ./server/cmd/ticketbench ./server/cmd/ticketd)
  builds="before=$OUT/before-bin/ticketbench $builds"
fi
tb=$OUT/bin/ticketbench
stages='core.gather core.propose raft.leader.dispatchLog raft.commitTime raft.replication.appendEntries.rpc raft.rpc.appendEntries.storeLogs raft.fsm.enqueue raft.fsm.apply core.commit_apply core.result core.answer core.total'

floor() {
  "$tb" -q -workload fsync -duration 5s 2>&1 | sed -n 's/.*lat_ms p50=\([0-9.]*\) p90=[0-9.]* p99=\([0-9.]*\).*other_cpu_cores=\([0-9.]*\).*/fsync floor: p50 \1 ms, p99 \2 ms (other load \3 cores)/p'
}

floor
for pass in $(seq 1 "$REPS"); do
  for n in $NODES; do
    for c in $CLIENTS; do
      for inf in $INFLIGHT; do
       for build in $builds; do
        name=${build%%=*} bin=${build#*=}
        tag="pass$pass-n$n-c$c-i$inf"
        [ -n "${BEFORE:-}" ] && tag="$name-$tag"
        load=$(cut -d' ' -f1 /proc/loadavg)
        line=$(TICKETBENCH_INFLIGHT=$inf "$bin" -q -nodes "$n" -clients "$c" -warmup "$WARMUP" -duration "$DURATION" -server-timings "$OUT/$tag.txt" 2>&1 | tail -1)
        echo "$line" > "$OUT/$tag.line"
        echo "== $tag load $load: $(echo "$line" | grep -o '([0-9.]*/s)\|lat_ms p50=[0-9.]*\|acq_ms p50=[0-9.]*\|server_cpu_cores=[0-9.]*\|bench_cpu_cores=[0-9.]*\|other_cpu_cores=[0-9.]*\|ops_per_commit=[0-9.]*' | tr '\n' ' ')"
        tim=$OUT/$tag.txt
        if [ "$n" != 1 ]; then # the leader's file: only the leader's core answers batches
          tim=$(grep -l '^core.total' "$OUT/$tag.txt".* | head -1)
          # a follower's log write and a round trip, from a follower's file
          fol=$(grep -L '^core.total' "$OUT/$tag.txt".* | head -1)
          grep -h '^raft.rpc.appendEntries.storeLogs' "$fol" >> "$tim" || true
        fi
        for s in $stages; do
          awk -v s="$s" '$1 == s { printf "  %-40s %s %s\n", s, $3, $5 }' "$tim"
        done
        acq=$(echo "$line" | sed -n 's/.*acq_ms p50=\([0-9.]*\).*/\1/p')
        tot=$(awk '$1 == "core.total" { sub("p50=", "", $3); print $3 }' "$tim")
        awk -v a="$acq" -v t="$tot" 'BEGIN { if (a != "" && t != "") printf "  %-40s p50=%.3f\n", "outside the core (acquire - total)", a - t }'
       done
      done
    done
  done
done
floor
echo "timings in $OUT"
