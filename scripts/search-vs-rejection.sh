#!/bin/sh
# Acceptance 2 of the search phase: on expr, search → sft from a base model against rejection
# sampling → sft with the same forward-token budget per prompt, seeds 1 and 2 (TestSearchAcceptance
# says what it runs and which variables override its configs). Prints each side's data and held-out
# exact match.
set -e
cd "$(dirname "$0")/.."
export GOEXPERIMENT=simd GOFLAGS=-mod=mod
TEMPER_SEARCH_ACCEPT=1 exec go test ./workflows/ -run 'TestSearchAcceptance$' -v -count=1 -timeout 180m "$@"
