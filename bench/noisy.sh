#!/usr/bin/env bash
# Noisy neighbour: how much one application flooding a shared server at its
# quotas costs another application's latency.
#
#   bench/noisy.sh
#
# Builds ticketd and ticketbench, then on loopback, one ticketd (fsync on)
# with two client principals, each with its own key prefix:
#   quiet  the measured application: ticketbench -workload uncontended
#          (QUIET_CLIENTS workers, one connection), no quota;
#   noisy  the flooder: ticketbench -workload uncontended with NOISY_CLIENTS
#          workers over NOISY_CONNS connections, retrying at once whatever
#          the answer (a refused acquire is retried after ticketbench's 20 ms).
# Three runs per pass, each on a freshly started server:
#   alone     quiet only;
#   quotas    quiet while noisy floods, noisy with the quotas below;
#   no-quota  quiet while noisy floods, no quotas (as before quotas).
# Prints one line per run with quiet's ops/s and pair latency p50/p99, and
# the noisy side's ops/s and refused requests.
#
# Environment (defaults in brackets):
#   DURATION [15s] WARMUP [5s]       quiet's measured window and warm-up
#   QUIET_CLIENTS [16]               quiet's workers
#   NOISY_CLIENTS [512] NOISY_CONNS [8]
#   NOISY_RATE [2000]                noisy's requests_per_second quota
#   NOISY_IN_FLIGHT [64]             noisy's in_flight quota
#   NOISY_HELD [64]                  noisy's held_tickets quota
#   PORT_BASE [25300]                client, Raft, HTTP ports: PORT_BASE..+2
#   REPS [3]                         passes over the three runs (interleaved,
#                                    so that a busy moment of a shared
#                                    machine shows as a spread, not a bias)
set -euo pipefail

DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-5s}
QUIET_CLIENTS=${QUIET_CLIENTS:-16}
NOISY_CLIENTS=${NOISY_CLIENTS:-512}
NOISY_CONNS=${NOISY_CONNS:-8}
NOISY_RATE=${NOISY_RATE:-2000}
NOISY_IN_FLIGHT=${NOISY_IN_FLIGHT:-64}
NOISY_HELD=${NOISY_HELD:-64}
PORT_BASE=${PORT_BASE:-25300}
REPS=${REPS:-3}

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
server_pid=""
cleanup() {
	if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$root/server" && go build -o "$tmp/ticketd" ./cmd/ticketd && go build -o "$tmp/ticketbench" ./cmd/ticketbench)

quiet_token=quiet-$RANDOM$RANDOM
noisy_token=noisy-$RANDOM$RANDOM
quiet_hash=$(printf %s "$quiet_token" | "$tmp/ticketd" hash-token)
noisy_hash=$(printf %s "$noisy_token" | "$tmp/ticketd" hash-token)
addr=127.0.0.1:$PORT_BASE
http=127.0.0.1:$((PORT_BASE + 2))

# config QUOTAS writes the configuration; QUOTAS is yes or no.
config() {
	cat >"$tmp/ticketd.toml" <<EOF
[[auth.principals]]
name = "quiet"
role = "client"
key_prefixes = ["quiet/"]
token_sha256 = ["$quiet_hash"]

[[auth.principals]]
name = "noisy"
role = "client"
key_prefixes = ["noisy/"]
token_sha256 = ["$noisy_hash"]
EOF
	if [ "$1" = yes ]; then
		cat >>"$tmp/ticketd.toml" <<EOF
[auth.principals.quota]
connections = $NOISY_CONNS
held_tickets = $NOISY_HELD
waiters = $NOISY_HELD
in_flight = $NOISY_IN_FLIGHT
requests_per_second = $NOISY_RATE
EOF
	fi
}

start_server() {
	rm -rf "$tmp/data"
	"$tmp/ticketd" --config "$tmp/ticketd.toml" --listen "$addr" --raft-listen 127.0.0.1:$((PORT_BASE + 1)) \
		--http-listen "$http" --data-dir "$tmp/data" --node-id n1 --initial-cluster-state new \
		--log-level warn 2>"$tmp/ticketd.log" &
	server_pid=$!
	for _ in $(seq 100); do
		curl -fs "http://$http/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "ticketd did not become ready; its log:" >&2
	cat "$tmp/ticketd.log" >&2
	exit 1
}

stop_server() {
	kill "$server_pid"
	wait "$server_pid" 2>/dev/null || true
	server_pid=""
}

# field JSON PATH prints one number of ticketbench's JSON result.
field() { python3 -c 'import json,sys; r=json.loads(sys.argv[1]); v=r
for k in sys.argv[2].split("."): v=v[k]
print(round(v, 2) if isinstance(v, float) else v)' "$1" "$2"; }

quiet_run() {
	"$tmp/ticketbench" -q -json -addr "$addr" -http "$http" -token "$quiet_token" -prefix quiet \
		-workload uncontended -clients "$QUIET_CLIENTS" -warmup "$WARMUP" -duration "$DURATION" 2>>"$tmp/quiet.log"
}

noisy_run() {
	# Longer than quiet's run, so that the flood covers its whole window.
	"$tmp/ticketbench" -q -json -addr "$addr" -token "$noisy_token" -prefix noisy \
		-workload uncontended -clients "$NOISY_CLIENTS" -conns "$NOISY_CONNS" -warmup 2s \
		-duration "$(( ${WARMUP%s} + ${DURATION%s} + 2 ))s" -op-timeout 5s 2>>"$tmp/noisy.log"
}

report() { # name quiet-json [noisy-json]
	local line
	line=$(printf '%-9s quiet: %8s ops/s  p50 %6s ms  p99 %7s ms  errors %s' "$1" \
		"$(field "$2" ops_per_sec)" "$(field "$2" latency_ms.p50)" "$(field "$2" latency_ms.p99)" "$(field "$2" errors)")
	if [ $# -ge 3 ]; then
		line="$line   noisy: $(field "$3" ops_per_sec) ops/s, $(field "$3" errors) refused or failed"
	fi
	echo "$line"
}

echo "# bench/noisy.sh: REPS=$REPS DURATION=$DURATION WARMUP=$WARMUP QUIET_CLIENTS=$QUIET_CLIENTS NOISY_CLIENTS=$NOISY_CLIENTS NOISY_CONNS=$NOISY_CONNS NOISY_RATE=$NOISY_RATE NOISY_IN_FLIGHT=$NOISY_IN_FLIGHT NOISY_HELD=$NOISY_HELD; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

for rep in $(seq "$REPS"); do
	echo "# pass $rep of $REPS"
	config yes
	start_server
	alone=$(quiet_run)
	stop_server
	report alone "$alone"

	for quotas in yes no; do
		config "$quotas"
		start_server
		noisy_run >"$tmp/noisy.json" &
		noisy_pid=$!
		sleep 1
		quiet=$(quiet_run)
		wait "$noisy_pid"
		stop_server
		name=quotas
		[ "$quotas" = no ] && name=no-quota
		report "$name" "$quiet" "$(cat "$tmp/noisy.json")"
	done
done
