#!/usr/bin/env bash
# Side-by-side benchmark of Ticketing and etcd on this machine, on loopback.
#
#   bench/compare.sh            # full mode (~30-40 min)
#   bench/compare.sh quick      # quick mode: short windows, small N (~8 min)
#
# Builds ticketbench + ticketd (main module) and etcdbench (bench/etcd, its own
# module: the main module never depends on etcd), then, for 1 and 3 nodes, runs
# each row REPS times, Ticketing and etcd back to back (A B A B ...), every run
# with its own freshly started servers (fsync on), and appends each run's JSON
# line to bench/compare/results/compare-<mode>-<date>.jsonl. At the end bench/compare (main module,
# no etcd import) prints the markdown table of Ticketing/etcd ratios, each
# from the same pass, to stdout and to the .md next to the .jsonl.
#
# Environment (defaults in brackets; quick mode in parentheses):
#   REPS [2]            passes over every row (each pair at least twice)
#   NODES ["1 3"]       node counts
#   DURATION [10s] (3s) measured window; WARMUP [2s] (1s)
#   HOLD_N [1000000] (100000)       Ticketing tickets held
#   ETCD_HOLD_N [50000] (10000)     etcd locks held (one session each; etcd's
#                                   lease keepalives make 1M infeasible here)
#   CONNS [10000] (1000)            idle connections (Ticketing; etcd too where
#                                   the open files limit allows, see below)
#   ETCD_CONNS_1, ETCD_CONNS_3      etcd idle clients on 1 / 3 nodes
#   HOLD_NODES ["1 3"], CONN_NODES ["1 3"]  node counts for those rows
#   QUIET_WAIT [20] (0)             seconds to wait for a quiet machine per run
#   OUT                             output .jsonl
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODE=${1:-full}
case "$MODE" in
full)
	: "${DURATION:=10s}" "${WARMUP:=2s}" "${HOLD_N:=1000000}" "${ETCD_HOLD_N:=50000}" "${CONNS:=10000}" "${QUIET_WAIT:=20}" ;;
quick)
	: "${DURATION:=3s}" "${WARMUP:=1s}" "${HOLD_N:=100000}" "${ETCD_HOLD_N:=10000}" "${CONNS:=1000}" "${QUIET_WAIT:=0}" ;;
*)
	echo "usage: $0 [full|quick]" >&2; exit 2 ;;
esac
: "${REPS:=2}" "${NODES:=1 3}" "${HOLD_NODES:=$NODES}" "${CONN_NODES:=$NODES}"
OUT=${OUT:-$ROOT/bench/compare/results/compare-$MODE-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
mkdir -p "$(dirname "$OUT")"

# 10,000 idle connections need many descriptors: raise the soft limit to the
# hard one for every child (ticketbench raises its own too). etcdbench's
# clientv3 clients open one connection per endpoint (30,000 for 10,000 clients
# on 3 nodes) in one process; where the hard limit cannot hold that (20,000
# here, no CAP_SYS_RESOURCE), the etcd 3-node row uses fewer idle clients
# (ETCD_CONNS_3, default: what fits) and the table says so.
ulimit -Sn "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -Sn)
if [ "$NOFILE" = unlimited ]; then NOFILE=1048576; fi
: "${ETCD_CONNS_1:=$CONNS}"
if [ -z "${ETCD_CONNS_3:-}" ]; then
	ETCD_CONNS_3=$(((NOFILE - 2000) / 3))
	if [ "$ETCD_CONNS_3" -gt "$CONNS" ]; then ETCD_CONNS_3=$CONNS; fi
fi
echo "compare: open files limit $NOFILE; etcd idle clients: $ETCD_CONNS_1 on 1 node, $ETCD_CONNS_3 on 3 nodes" >&2

BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT
echo "compare: building into $BIN" >&2
go build -o "$BIN/ticketbench" ./server/cmd/ticketbench || exit 1
go build -o "$BIN/ticketd" ./server/cmd/ticketd || exit 1 # ticketbench finds it next to itself
(cd bench/etcd && GOWORK=off go build -o "$BIN/etcdbench" ./cmd/etcdbench) || exit 1

busy_cores() { # machine busy cores over 2 s, from /proc/stat
	local a b busy=0 i
	a=($(head -1 /proc/stat)); sleep 2; b=($(head -1 /proc/stat))
	for i in 1 2 3 6 7 8; do busy=$((busy + b[i] - a[i])); done
	awk -v b="$busy" 'BEGIN { printf "%.2f", b / 200 }'
}
wait_quiet() {
	[ "$QUIET_WAIT" -gt 0 ] || return 0
	local deadline=$((SECONDS + QUIET_WAIT)) b
	while :; do
		b=$(busy_cores)
		if awk -v b="$b" 'BEGIN { exit !(b < 0.3) }'; then return 0; fi
		if ((SECONDS >= deadline)); then
			echo "compare: machine still busy ($b cores) after ${QUIET_WAIT}s; running anyway" >&2
			return 0
		fi
		echo "compare: waiting for a quiet machine (busy $b cores)" >&2
		sleep 5
	done
}

failed=0
# one SYSTEM NODES WORKLOAD ARGS...: one run, its JSON line appended to $OUT.
one() {
	local sys=$1 nodes=$2 wl=$3 line
	shift 3
	wait_quiet
	echo "compare: $sys nodes=$nodes $wl $*" >&2
	if [ "$sys" = ticketing ]; then
		line=$("$BIN/ticketbench" -q -json -nodes "$nodes" -workload "$wl" -duration "$DURATION" -warmup "$WARMUP" "$@")
	else
		line=$("$BIN/etcdbench" -q -json -nodes "$nodes" -workload "$wl" -duration "$DURATION" -warmup "$WARMUP" "$@")
	fi
	local rc=$?
	if [ $rc -ne 0 ] || [ -z "$line" ]; then
		echo "compare: $sys nodes=$nodes $wl failed (exit $rc)" >&2
		failed=$((failed + 1))
		return
	fi
	echo "$line" >>"$OUT"
}
# pair NODES WORKLOAD [ticketing args] -- [etcd args]: A then B.
pair() {
	local nodes=$1 wl=$2
	shift 2
	local targs=() eargs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do targs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	eargs=("$@")
	one ticketing "$nodes" "$wl" "${targs[@]}"
	one etcd "$nodes" "$wl" "${eargs[@]}"
}
has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }

echo "compare: mode=$MODE reps=$REPS nodes=[$NODES] duration=$DURATION warmup=$WARMUP hold_n=$HOLD_N etcd_hold_n=$ETCD_HOLD_N conns=$CONNS -> $OUT" >&2
for nodes in $NODES; do
	for rep in $(seq 1 "$REPS"); do
		echo "compare: === nodes=$nodes pass $rep/$REPS" >&2
		pair "$nodes" uncontended -clients 128 -- -clients 128
		pair "$nodes" contended -clients 16 -- -clients 16
		pair "$nodes" uncontended -clients 1 -- -clients 1
		if has "$HOLD_NODES" "$nodes"; then
			pair "$nodes" hold -n "$HOLD_N" -- -n "$ETCD_HOLD_N"
		fi
		if has "$CONN_NODES" "$nodes"; then
			ec=$ETCD_CONNS_1
			if [ "$nodes" = 3 ]; then ec=$ETCD_CONNS_3; fi
			pair "$nodes" connections -n "$CONNS" -- -n "$ec"
		fi
	done
done

MD=${OUT%.jsonl}.md
{
	echo "Mode $MODE, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), duration $DURATION after $WARMUP warmup, $REPS passes."
	echo
	go run ./bench/compare -title "Ticketing vs etcd ($MODE)" "$OUT"
} | tee "$MD"
echo "compare: results in $OUT and $MD; $failed run(s) failed" >&2
[ "$failed" -eq 0 ]
