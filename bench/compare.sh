#!/usr/bin/env bash
# Side-by-side benchmark of Ticketing and etcd on this machine, on loopback.
#
#   bench/compare.sh            # full mode (about an hour on a quiet machine)
#   bench/compare.sh quick      # quick mode: 5 s windows, small N, one pass (< 15 min)
#
# Builds ticketbench + ticketd (server module) and etcdbench (bench/etcd, its
# own module: nothing in the workspace depends on etcd). Then, for 1 and 3
# nodes, REPS passes over every row. A pass starts with the disk's floor
# (ticketbench -workload fsync: 4 KiB append + fdatasync, queue depth 1). Each
# row is a pair: Ticketing, then etcd, every run with its own freshly started
# servers (fsync on). The pair is accepted only when BOTH runs had less than
# MAX_OTHER cores of other load (other_cpu_cores in the run's notes: the
# machine's busy CPU from /proc/stat minus the servers' and the generator's);
# otherwise it is run again, up to TRIES times, and the least disturbed try
# is kept (the table shows its noise). Rejected tries go to <out>.rejected.jsonl.
# Accepted (or kept) lines are appended to bench/compare/results/compare-<mode>-<date>.jsonl;
# at the end bench/compare prints the markdown table (ratios per pair,
# server and generator CPU beside the rates) to stdout and to the .md beside it.
#
# Both sides run the documented usage by default: one Broker / one
# clientv3.Client per process, etcd's default 60 s session TTL, one context
# per pair, 10 s warm-up. The 128-worker row is also run with 16 connections
# on both sides.
#
# Environment (defaults in brackets; quick mode in parentheses):
#   REPS [2] (1)        passes over every row
#   NODES ["1 3"]       node counts
#   DURATION [10s] (5s) measured window; WARMUP [10s] (10s)
#   HC_WARMUP [2s]      warm-up of the hold and connections samples (they
#                       measure memory; their fill or setup already ran in)
#   HOLD_N [1000000] (100000)       Ticketing tickets held
#   ETCD_HOLD_N [50000] (10000)     etcd locks held (one session each; etcd's
#                                   lease keepalives make 1M infeasible here)
#   CONNS [10000] (1000)            idle connections (Ticketing; etcd too where
#                                   the open files limit allows, see below)
#   ETCD_CONNS_1, ETCD_CONNS_3      etcd idle clients on 1 / 3 nodes
#   HOLD_NODES ["1 3"], CONN_NODES ["1 3"]  node counts for those rows
#   ROWS ["w128 w128c4 w128c16 contended single"]  the throughput and latency
#                       rows to run: 128 workers on one connection, on 4, on 16,
#                       16 workers on one key, one client (e.g. ROWS="single
#                       w128" HOLD_NODES= CONN_NODES= for a short comparison)
#   MAX_OTHER [0.3]     other load (cores) a run may have had to be accepted
#   TRIES [4] (2)       tries per pair before the least disturbed is kept
#   QUIET_WAIT [60] (30) seconds to wait for a quiet machine before a try
#   BUDGET [0] (840)    seconds the whole run may take (0: no bound): a noisy
#                       pair is retried only while the retry and the pairs
#                       still to come (at the average time per try so far)
#                       fit in it, so that quick mode ends within 15 minutes
#   REDIS_NODES ["1"]   node counts with a Redis run in each pair ("" for none;
#                       Redis replicates asynchronously, so 1 is the only
#                       comparable count)
#   REDIS_ROWS ["w128 contended single"]  rows that get the Redis run (one
#                       shared go-redis client; its pool is sized to the workers)
#   OUT                 output .jsonl
#
# Redis: one redis-server (Debian's package, installed with apt-get when
# missing) started by redisbench with appendonly yes and appendfsync always,
# its data dir under $TMPDIR like the others'; the pair is then Ticketing,
# etcd, Redis, and accepted only when all three runs were quiet.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODE=${1:-full}
case "$MODE" in
full)
	: "${REPS:=2}" "${DURATION:=10s}" "${WARMUP:=10s}" "${HOLD_N:=1000000}" "${ETCD_HOLD_N:=50000}" "${CONNS:=10000}" \
		"${TRIES:=4}" "${QUIET_WAIT:=60}" "${BUDGET:=0}" ;;
quick)
	: "${REPS:=1}" "${DURATION:=5s}" "${WARMUP:=10s}" "${HOLD_N:=100000}" "${ETCD_HOLD_N:=10000}" "${CONNS:=1000}" \
		"${TRIES:=3}" "${QUIET_WAIT:=20}" "${BUDGET:=840}" ;;
*)
	echo "usage: $0 [full|quick]" >&2; exit 2 ;;
esac
: "${NODES:=1 3}" "${HOLD_NODES=$NODES}" "${CONN_NODES=$NODES}" "${ROWS=w128 w128c4 w128c16 contended single}" "${MAX_OTHER:=0.3}" "${HC_WARMUP:=2s}" \
	"${REDIS_NODES=1}" "${REDIS_ROWS=w128 contended single}"
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
REJECTED=${OUT%.jsonl}.rejected.jsonl
echo "compare: building into $BIN" >&2
go build -o "$BIN/ticketbench" ./server/cmd/ticketbench || exit 1
go build -o "$BIN/ticketd" ./server/cmd/ticketd || exit 1 # ticketbench finds it next to itself
(cd bench/etcd && GOWORK=off go build -o "$BIN/etcdbench" ./cmd/etcdbench) || exit 1
if [ -n "$REDIS_NODES" ]; then
	if ! command -v redis-server >/dev/null; then
		echo "compare: installing redis-server (Debian's package) for the Redis runs" >&2
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null || exit 1
	fi
	(cd bench/redis && GOWORK=off go build -o "$BIN/redisbench" ./cmd/redisbench) || exit 1
fi

busy_cores() { # machine busy cores over 2 s, from /proc/stat (nothing of ours runs)
	local a b busy=0 i
	a=($(head -1 /proc/stat)); sleep 2; b=($(head -1 /proc/stat))
	for i in 1 2 3 6 7 8; do busy=$((busy + b[i] - a[i])); done
	awk -v b="$busy" 'BEGIN { printf "%.2f", b / 200 }'
}
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
wait_quiet() {
	[ "$QUIET_WAIT" -gt 0 ] || return 0
	may_retry || return 0 # no time left to wait in the budget
	local deadline=$((SECONDS + QUIET_WAIT)) b
	while :; do
		b=$(busy_cores)
		if lt "$b" "$MAX_OTHER"; then return 0; fi
		if ((SECONDS >= deadline)); then
			echo "compare: machine still busy ($b cores) after ${QUIET_WAIT}s; running anyway" >&2
			return 0
		fi
		echo "compare: waiting for a quiet machine (busy $b cores)" >&2
		sleep 3
	done
}
other_of() { # other_cpu_cores of a JSON line (9 when absent: never accepted)
	local v
	v=$(sed -n 's/.*other_cpu_cores=\([0-9.]*\).*/\1/p' <<<"$1")
	echo "${v:-9}"
}

has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }
failed=0
START=$SECONDS
TRIES_DONE=0
# pairs per pass: 4 rows + hold + connections where they run
PAIRS_LEFT=0
for nodes in $NODES; do
	n=$(wc -w <<<"$ROWS")
	has "$HOLD_NODES" "$nodes" && n=$((n + 1))
	has "$CONN_NODES" "$nodes" && n=$((n + 1))
	PAIRS_LEFT=$((PAIRS_LEFT + n * REPS))
done
# may_retry: whether one more try of this pair and one try of every pair
# still to come fit in BUDGET, at the average time per try so far.
may_retry() {
	[ "$BUDGET" -gt 0 ] || return 0
	local spent=$((SECONDS - START)) avg
	avg=$((spent / (TRIES_DONE > 0 ? TRIES_DONE : 1)))
	((spent + avg * PAIRS_LEFT <= BUDGET))
}
# one SYSTEM NODES WORKLOAD ARGS...: one run; its JSON line on stdout.
one() {
	local sys=$1 nodes=$2 wl=$3 line bin=$BIN/ticketbench
	shift 3
	[ "$sys" = etcd ] && bin=$BIN/etcdbench
	[ "$sys" = redis ] && bin=$BIN/redisbench
	echo "compare: $sys nodes=$nodes $wl $*" >&2
	line=$("$bin" -q -json -nodes "$nodes" -workload "$wl" -duration "$DURATION" "$@")
	local rc=$?
	if [ $rc -ne 0 ] || [ -z "$line" ]; then
		echo "compare: $sys nodes=$nodes $wl failed (exit $rc)" >&2
		return 1
	fi
	echo "$line"
}
# pair NODES WORKLOAD [common args] -- [ticketing args] -- [etcd args]:
# Ticketing then etcd (then Redis, with the etcd args, when WITH_REDIS=1),
# repeated until every run had < MAX_OTHER other load.
WITH_REDIS=0
pair() {
	local nodes=$1 wl=$2
	shift 2
	local cargs=() targs=() eargs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do cargs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do targs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	eargs=("$@")
	local try best=99 bt="" be="" br="" t e r="" ot oe or=0 worst
	for try in $(seq 1 "$TRIES"); do
		wait_quiet
		TRIES_DONE=$((TRIES_DONE + 1))
		t=$(one ticketing "$nodes" "$wl" "${cargs[@]}" "${targs[@]}") || { failed=$((failed + 1)); PAIRS_LEFT=$((PAIRS_LEFT - 1)); return; }
		e=$(one etcd "$nodes" "$wl" "${cargs[@]}" "${eargs[@]}") || { failed=$((failed + 1)); PAIRS_LEFT=$((PAIRS_LEFT - 1)); return; }
		if [ "$WITH_REDIS" = 1 ]; then
			r=$(one redis "$nodes" "$wl" "${cargs[@]}" "${eargs[@]}") || { failed=$((failed + 1)); PAIRS_LEFT=$((PAIRS_LEFT - 1)); return; }
			or=$(other_of "$r")
		fi
		ot=$(other_of "$t"); oe=$(other_of "$e")
		worst=$(awk -v a="$ot" -v b="$oe" -v c="$or" 'BEGIN { m = (a > b ? a : b); print (c > m ? c : m) }')
		if lt "$worst" "$best"; then best=$worst bt=$t be=$e br=$r; fi
		if lt "$worst" "$MAX_OTHER"; then
			echo "compare: pair accepted (other load $ot / $oe / $or cores)" >&2
			break
		fi
		printf '%s\n%s\n' "$t" "$e" >>"$REJECTED"
		[ -n "$r" ] && printf '%s\n' "$r" >>"$REJECTED"
		echo "compare: pair rejected, other load $ot / $oe / $or cores (try $try/$TRIES)" >&2
		if [ "$try" -lt "$TRIES" ] && ! may_retry; then
			echo "compare: no time left in the budget (${BUDGET}s) for another try; keeping the least disturbed" >&2
			break
		fi
	done
	PAIRS_LEFT=$((PAIRS_LEFT - 1))
	if ! lt "$best" "$MAX_OTHER"; then
		echo "compare: no quiet pair for nodes=$nodes $wl ${cargs[*]}; kept the least disturbed (other load $best cores)" >&2
	fi
	printf '%s\n%s\n' "$bt" "$be" >>"$OUT"
	[ -n "$br" ] && printf '%s\n' "$br" >>"$OUT"
}
echo "compare: mode=$MODE reps=$REPS nodes=[$NODES] duration=$DURATION warmup=$WARMUP hold_n=$HOLD_N etcd_hold_n=$ETCD_HOLD_N conns=$CONNS max_other=$MAX_OTHER tries=$TRIES -> $OUT" >&2
for nodes in $NODES; do
	for rep in $(seq 1 "$REPS"); do
		echo "compare: === nodes=$nodes pass $rep/$REPS" >&2
		wait_quiet
		"$BIN/ticketbench" -q -json -workload fsync -warmup 1s -duration "$DURATION" >>"$OUT" || failed=$((failed + 1))
		redis_for() { WITH_REDIS=0; has "$REDIS_NODES" "$nodes" && has "$REDIS_ROWS" "$1" && WITH_REDIS=1; }
		redis_for w128; has "$ROWS" w128 && pair "$nodes" uncontended -clients 128 -warmup "$WARMUP" -- -conns 1 -- -conns 1
		redis_for w128c4; has "$ROWS" w128c4 && pair "$nodes" uncontended -clients 128 -warmup "$WARMUP" -- -conns 4 -- -conns 4
		redis_for w128c16; has "$ROWS" w128c16 && pair "$nodes" uncontended -clients 128 -warmup "$WARMUP" -- -conns 16 -- -conns 16
		redis_for contended; has "$ROWS" contended && pair "$nodes" contended -clients 16 -warmup "$WARMUP"
		redis_for single; has "$ROWS" single && pair "$nodes" uncontended -clients 1 -warmup "$WARMUP"
		WITH_REDIS=0
		if has "$HOLD_NODES" "$nodes"; then
			pair "$nodes" hold -warmup "$HC_WARMUP" -- -n "$HOLD_N" -- -n "$ETCD_HOLD_N"
		fi
		if has "$CONN_NODES" "$nodes"; then
			ec=$ETCD_CONNS_1
			if [ "$nodes" = 3 ]; then ec=$ETCD_CONNS_3; fi
			pair "$nodes" connections -warmup "$HC_WARMUP" -- -n "$CONNS" -- -n "$ec"
		fi
	done
done

MD=${OUT%.jsonl}.md
{
	echo "Mode $MODE, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), duration $DURATION after $WARMUP warm-up, $REPS pass(es), pairs accepted below $MAX_OTHER cores of other load (up to $TRIES tries), $((SECONDS - START)) s."
	echo
	go run ./bench/compare -title "Ticketing vs etcd and Redis ($MODE)" "$OUT"
} | tee "$MD"
echo "compare: results in $OUT and $MD; $failed run(s) failed" >&2
[ "$failed" -eq 0 ]
