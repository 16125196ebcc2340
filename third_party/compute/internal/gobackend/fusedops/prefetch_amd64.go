// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fusedops

import "unsafe"

// prefetchT0 issues a PREFETCHT0 of every cache line of [p, p+n), n > 0 (prefetch_amd64.s); it reads
// nothing and never faults.
//
//go:noescape
func prefetchT0(p unsafe.Pointer, n uintptr)

// prefetchRows prefetches rows [lo, hi) of the [rows, d] float32 matrix x (nothing when the range is
// empty or outside x).
func prefetchRows(x []float32, d, lo, hi int) {
	if lo < 0 || lo >= hi || hi*d > len(x) {
		return
	}
	prefetchT0(unsafe.Pointer(unsafe.SliceData(x[lo*d:])), uintptr((hi-lo)*d*4))
}
