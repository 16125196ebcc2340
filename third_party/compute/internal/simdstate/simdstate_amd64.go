// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package simdstate

import "simd/archsimd"

var hasAVX = archsimd.X86.AVX()

// ClearUpper runs VZEROUPPER where the CPU has AVX (a no-op elsewhere).
func ClearUpper() {
	if hasAVX {
		archsimd.ClearAVXUpperBits()
	}
}
