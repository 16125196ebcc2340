#!/usr/bin/env bash
# Issue 39, item 5 and acceptance 2: the training memory curve (peak RSS and speed per sequence
# length, batch 1, remat layer; one process per point) of small and base, written to
# docs/engine-memory-curve.json, and docs/engine-memory.svg redrawn from it.
#
#   scripts/bench/engine-memory-curve.sh          # builds bin/temper if missing; ~1 h on 2 busy cores
#   SEQS=512,2048 PRESETS=small BIN=bin/temper scripts/bench/engine-memory-curve.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOEXPERIMENT=simd GOFLAGS=-mod=mod GOTOOLCHAIN=local
BIN=${BIN:-bin/temper}
SEQS=${SEQS:-512,2048,8192,16384}
PRESETS=${PRESETS:-small,base}
if [ ! -x "$BIN" ]; then
	echo "building $BIN (minutes)..." >&2
	go build -o "$BIN" ./cmd/temper
fi
"$BIN" bench model --presets "$PRESETS" --seq "$SEQS" --batch 1 --remat layer --json >docs/engine-memory-curve.json.new
mv docs/engine-memory-curve.json.new docs/engine-memory-curve.json
TEMPER_WRITE_DOCS=1 go test -count=1 ./internal/bench/ -run TestEngineMemoryPicture
python3 -c 'import json,sys; r=json.load(open("docs/engine-memory-curve.json")); [print("%-6s %6d  peak RSS %6.0f MiB  step %7.2f s (CPU %7.2f s)  %7.0f tok/s" % (p["preset"],p["seq"],p["peak_rss_bytes"]/2**20,p["step_seconds"],p["step_cpu_seconds"],p["tokens_per_sec"])) for p in r["points"]]'
