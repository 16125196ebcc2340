#!/bin/sh
# Greedy exact match of a checkpoint on the demo's held-out add2 prompts, by operand digit counts
# (1+1, 1+2, 2+1, 2+2): `scripts/demo-trials/heldout-classes.sh CHECKPOINT [SEED]`, CHECKPOINT a
# checkpoint directory or file:// URI (`temper status` lists a run's), SEED the pipeline seed (1).
# It shows the structure behind docs/lab-notes/demo-sizing.md: a quarter of add2's draws are the 100
# one-digit facts, so 500 held-out draws hold 81 of them (seed 1), and training never sees those prompts.
set -e
cd "$(dirname "$0")/../.."
bin=${TEMPER:-bin/temper}
ck=${1:?usage: heldout-classes.sh CHECKPOINT [SEED]}
ck=${ck#file://}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" data gen add2 -n 1 -heldout 500 -seed "${2:-1}" -out "$tmp/d.jsonl" >/dev/null 2>&1
sed 's/.*"prompt":"\([^"]*\)","completion":"\([^"]*\)".*/\1 \2/' "$tmp/d.heldout.jsonl" >"$tmp/pa"
set --
while read -r p a; do set -- "$@" -prompt "$p"; done <"$tmp/pa"
"$bin" generate -temperature 0 -max-new-tokens 5 "$@" "$ck" >"$tmp/gen"
cut -f1 "$tmp/gen" | paste -d' ' "$tmp/pa" - | awk '{
	split($1, ab, /[+=]/); k = length(ab[1]) "+" length(ab[2])
	got = substr($3, length($1) + 1); n[k]++; all++
	if (got == $2) { ok[k]++; good++ }
} END {
	for (k in n) printf "%s digits: %d/%d = %.3f\n", k, ok[k], n[k], ok[k] / n[k] | "sort"
	close("sort"); printf "all: %d/%d = %.3f\n", good, all, good / all
}'
