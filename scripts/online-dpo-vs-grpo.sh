#!/usr/bin/env bash
# Acceptance 5 of issue 42 (online DPO): from the demo's SFT checkpoint, online DPO
# (scripts/demo-trials/online-dpo-from-sft.yaml) in the demo's GRPO time budget must raise held-out
# exact match by at least 5 points; its curve is printed next to GRPO's.
#
#   scripts/online-dpo-vs-grpo.sh [--set phases.odpo.config.KEY=VALUE ...]
#
# One `temper dev` (its own home and port) runs everything: the demo pipeline (cmd/temper/demo.yaml,
# as `temper demo --set seed=SEED` runs it) gives the SFT checkpoint and GRPO's curve and training
# wall time (`train_seconds`); online DPO then runs from that checkpoint with max_seconds set to it.
# ROUNDS > 1 measures again, alternating: GRPO alone from the same checkpoint
# (scripts/demo-trials/grpo-from-sft.yaml: seeded, the demo's GRPO numbers again; only its time
# varies with the machine's load), then online DPO in that run's time. Arguments go to every online
# DPO run. It exits 1 when a round's online DPO rises by less than 5 points.
# Environment: TEMPER (the binary, default bin/temper), SEED (1), ROUNDS (1), PORT (17433: the dev
# server's gRPC port; pick a free one), KEEP=1 keeps the state directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TEMPER:-bin/temper}
seed=${SEED:-1}
rounds=${ROUNDS:-1}
port=${PORT:-17433}
addr=127.0.0.1:$port
home=$(mktemp -d "${TMPDIR:-/tmp}/temper-odpo-XXXXXX")

dev_pid=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $dev_pid ]]; then
		kill -TERM "$dev_pid" 2>/dev/null || true
		wait "$dev_pid" 2>/dev/null || true
	fi
	if [[ -n ${KEEP:-} ]]; then echo "state kept in $home"; else rm -rf "$home"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
	echo "online-dpo-vs-grpo.sh: port $port is taken (another server?): set PORT" >&2
	exit 2
fi
"$bin" dev --home "$home" --port "$port" --ui-port -1 >"$home/dev.log" 2>&1 &
dev_pid=$!
for _ in $(seq 600); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	kill -0 "$dev_pid" 2>/dev/null || { cat "$home/dev.log"; echo "online-dpo-vs-grpo.sh: temper dev exited" >&2; exit 1; }
	sleep 0.2
done

# run PIPELINE OUT [--set ...]: runs a pipeline to its end; OUT gets its result's JSON line.
run() {
	local file=$1 out=$2
	shift 2
	# A failed run still prints its JSON line (status, error): the check below reports it.
	{ "$bin" run "$file" --temporal "$addr" --home "$home" --wait --json --set "seed=$seed" "$@" 2>"$out.log" || true; } | tail -n 1 >"$out"
	jq -e '.status == "completed"' "$out" >/dev/null || { cat "$out.log" "$out"; echo "online-dpo-vs-grpo.sh: $file failed" >&2; exit 1; }
}
# phase OUT NAME: the phase's result.
phase() { jq -c --arg n "$2" '.phases[] | select(.name == $n)' "$1"; }
# report OUT NAME LABEL: the phase's curve (iteration@training seconds:exact match) and its rise.
report() {
	phase "$1" "$2" | jq -r --arg l "$3" '"\($l): \(.metrics.iterations) iterations in \(.metrics.train_seconds | round) s; exact match " +
		([.curve[] | "\(.step)@\(.seconds | round)s:\(.heldout_exact_match)"] | join(" ")) +
		"; \(.metrics.heldout_exact_match_before) -> \(.metrics.heldout_exact_match) (\((.metrics.heldout_exact_match - .metrics.heldout_exact_match_before) * 1000 | round / 10 | tostring) points)"'
}

echo "== demo pipeline (seed $seed), home $home"
run cmd/temper/demo.yaml "$home/demo.json"
from=$(phase "$home/demo.json" sft | jq -r .checkpoint)
grpo=$home/demo.json
failed=0
for r in $(seq "$rounds"); do
	if [[ $r -gt 1 ]]; then
		run scripts/demo-trials/grpo-from-sft.yaml "$home/grpo-$r.json" --set "phases.grpo.from=$from"
		grpo=$home/grpo-$r.json
	fi
	budget=$(phase "$grpo" grpo | jq -r .metrics.train_seconds)
	report "$grpo" grpo "round $r grpo       "
	run scripts/demo-trials/online-dpo-from-sft.yaml "$home/odpo-$r.json" --set "phases.odpo.from=$from" \
		--set "phases.odpo.config.max_seconds=$budget" "$@"
	report "$home/odpo-$r.json" odpo "round $r online dpo "
	rise=$(phase "$home/odpo-$r.json" odpo | jq '.metrics.heldout_exact_match - .metrics.heldout_exact_match_before')
	if ! jq -en --argjson d "$rise" '$d >= 0.05' >/dev/null; then
		echo "round $r: online DPO rose $rise (< 0.05) in GRPO's $budget s"
		failed=1
	fi
done
exit "$failed"
