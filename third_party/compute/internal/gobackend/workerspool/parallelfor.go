// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package workerspool

import (
	"sync/atomic"

	"github.com/gomlx/compute/support/envutil"
)

// ParallelOps is false when GOMLX_PARALLEL_OPS=false: ParallelFor then runs everything on the
// caller (to measure the splitting: it does not change results).
var ParallelOps = envutil.MustReadBool("GOMLX_PARALLEL_OPS", true)

// ParallelFor runs fn over [0, n) cut into ranges whose bounds (but n) are multiples of align, on
// the pool's workers and the calling goroutine, when n is at least twice grain (the least work
// worth a range); else fn(0, n) (nothing when n is 0). fn must only write what its range owns.
//
// It is for one large op under the sequential executor (elementwise ops, transposes, reductions,
// softmax), where only matmuls used every core; when the pool is busy (the parallel executor
// running several ops) Saturate starts no workers and the caller does all the ranges.
func (w *Pool) ParallelFor(n, grain, align int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := 1
	if ParallelOps && w != nil {
		workers = w.AdjustedMaxParallelism()
	}
	if workers <= 1 || n < 2*grain {
		fn(0, n)
		return
	}
	// A few ranges per worker: one that starts late (a sleeping thread takes tens of
	// microseconds to wake) then holds the others back less.
	chunks := min(4*workers, n/max(grain, 1))
	bound := func(c int) int {
		if c == chunks {
			return n
		}
		return c * n / chunks / align * align
	}
	var next atomic.Int32
	w.Saturate(func() {
		for {
			c := int(next.Add(1)) - 1
			if c >= chunks {
				return
			}
			if lo, hi := bound(c), bound(c+1); lo < hi {
				fn(lo, hi)
			}
		}
	})
}
