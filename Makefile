# The one place that sets how Temper is built: the README and docs/, .ci/run and scripts/ all go through here.
# GOEXPERIMENT=simd turns on the engine's AVX-512/AVX2 kernels (GoMLX's matmul, the fork's elementwise and exp); a plain `go build` still works.
export GOEXPERIMENT := simd
export GOFLAGS := -mod=mod

GO ?= go
TEST_TIMEOUT ?= 30m

.PHONY: demo dev test test-long test-cluster test-fork vet fmt build bench

demo:
	$(GO) run ./cmd/temper demo

dev:
	$(GO) run ./cmd/temper dev

build:
	$(GO) build -o bin/temper ./cmd/temper

# The xla build tag links GoMLX's XLA/PJRT backend (cgo); building it here keeps that path compiling
# (30-50 s more with a warm cache: it relinks the cgo binary each time; no plugin here, so nothing runs it).
test:
	$(GO) vet ./...
	$(GO) build -tags xla ./...
	$(GO) test -short -timeout $(TEST_TIMEOUT) ./...
	cd third_party/compute && $(GO) test ./internal/...
	# The AVX2 kernels end to end (on an AVX-512 machine they are otherwise never taken).
	GOMLX_SIMD_AVX512=false $(GO) test -short -count=1 ./algorithms/model/ ./tpu/

test-long:
	$(GO) test -timeout 90m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

fmt: # the main module only: third_party/compute keeps upstream's files as published
	gofmt -l -w $$($(GO) list -f '{{.Dir}}' ./...)

# The engine fork's own tests (third_party/compute, a separate module; also part of make test).
test-fork:
	cd third_party/compute && $(GO) test ./internal/...

# The engine fork against the upstream release it forks (third_party/README.md): fork-diff rewrites
# third_party/compute.patch (commit it: the fork's suite fails while it is stale); fork-generate runs the
# fork's go generate with pinned tools and fails unless git status of third_party/compute stays clean.
.PHONY: fork-diff fork-generate
fork-diff:
	third_party/fork.sh diff

fork-generate:
	third_party/fork.sh generate

# Scale-out cluster on PostgreSQL (not in `make test`: minutes, and it installs/starts PostgreSQL from
# Debian packages): Temporal on PostgreSQL via `temper server --db`, one workflow, trainer and reward
# worker process and two rollout worker processes, one killed mid-shard.
test-cluster:
	TEMPER_TEST_POSTGRES=$$(scripts/postgres.sh) $(GO) test -timeout 30m -count=1 -v -run 'TestPostgres|TestClusterPostgres' ./workers/devserver/ ./cmd/temper/
