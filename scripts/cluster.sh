#!/usr/bin/env bash
# Cluster mode without Docker: one `temper dev --roles none` (the embedded Temporal server and Web UI,
# no workers) and one `temper worker` process per role (temper, trainer, rollout, reward), then a tiny
# RL pipeline (scripts/cluster-rl.yaml, or the file given as $1) run with `temper run --wait`. Every
# process started here is stopped on exit. The state (SQLite file, store, logs) lives in a temporary
# TEMPER_HOME, removed on exit unless KEEP=1.
#
#   scripts/cluster.sh [PIPELINE.yaml]     env: PORT, UI_PORT (default: free ports), KEEP=1, NO_BUILD=1,
#                                          DB=postgres://... (the server's state in PostgreSQL, e.g.
#                                          DB=$(scripts/postgres.sh)), ROLLOUT_WORKERS=N (default 1)
set -euo pipefail

cd "$(dirname "$0")/.."
pipeline=${1:-scripts/cluster-rl.yaml}

if [[ -z ${NO_BUILD:-} ]]; then
	make build
fi
bin=$PWD/bin/temper

# free_port prints a local TCP port nobody listens on.
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>/dev/tcp/127.0.0.1/"$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "cluster.sh: no free port found" >&2
	return 1
}

listening() { (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

port=${PORT:-$(free_port)}
ui_port=${UI_PORT:-$(free_port)}
addr=127.0.0.1:$port
export TEMPER_HOME
TEMPER_HOME=$(mktemp -d "${TMPDIR:-/tmp}/temper-cluster-XXXXXX")
logs=$TEMPER_HOME/logs
mkdir -p "$logs"

pids=()
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	# Workers first (they drain their pollers), then the server.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [[ -n ${KEEP:-} ]]; then
		echo "state and logs kept in $TEMPER_HOME"
	else
		rm -rf "$TEMPER_HOME"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== temper dev --roles none (server $addr, Web UI http://127.0.0.1:$ui_port, home $TEMPER_HOME)"
db_flags=()
if [[ -n ${DB:-} ]]; then db_flags=(--db "$DB"); fi
"$bin" dev --roles none --port "$port" --ui-port "$ui_port" --home "$TEMPER_HOME" "${db_flags[@]}" >"$logs/dev.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
	listening "$port" && break
	kill -0 "${pids[0]}" 2>/dev/null || { cat "$logs/dev.log"; echo "cluster.sh: temper dev exited" >&2; exit 1; }
	sleep 0.1
done
listening "$port" || { cat "$logs/dev.log"; echo "cluster.sh: temper dev did not listen on $addr" >&2; exit 1; }

roles=(temper trainer reward)
for ((i = 0; i < ${ROLLOUT_WORKERS:-1}; i++)); do roles+=(rollout); done
for i in "${!roles[@]}"; do
	role=${roles[i]}
	"$bin" worker --roles "$role" --temporal "$addr" >"$logs/$role-$i.log" 2>&1 &
	pids+=($!)
	echo "== temper worker --roles $role (pid $!)"
done

echo "== temper run $pipeline --wait"
# In the background so that a signal to this script is handled at once (wait is interruptible); the
# cleanup stops it first if it is still running.
"$bin" run "$pipeline" --temporal "$addr" --ui "http://127.0.0.1:$ui_port" --home "$TEMPER_HOME" --wait &
run_pid=$!
echo "== processes"
for pid in "${pids[@]}"; do
	ps -o pid=,args= -p "$pid" || echo "$pid exited"
done
pids+=("$run_pid")
wait "$run_pid"
