#!/bin/sh
# Acceptance 4 of issue 42 (process reward models): on expr, a PRM trained on a search phase's step
# labels, its held-out step accuracy, and search valued by the PRM against search valued by rollouts
# (half the forward-token budget per prompt). TestPRMAcceptance says what it runs and which
# variables override its configs.
set -e
cd "$(dirname "$0")/.."
export GOEXPERIMENT=simd GOFLAGS=-mod=mod
TEMPER_PRM_ACCEPT=1 exec go test ./workflows/ -run 'TestPRMAcceptance$' -v -count=1 -timeout 180m "$@"
