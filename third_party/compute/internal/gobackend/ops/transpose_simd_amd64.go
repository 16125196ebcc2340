// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package ops

import (
	"simd/archsimd"

	"github.com/gomlx/compute/internal/transpose32"
	"github.com/gomlx/compute/support/envutil"
)

// The 8×8 block of 4-byte elements in assembly (transpose32.Block8x8AVX2) where the scalar block
// moves 64 elements one by one.
func init() {
	if archsimd.X86.AVX2() && envutil.MustReadBool(envutil.SIMD_AVX2_Env, true) {
		block8x8x32 = transpose32.Block8x8AVX2
	}
}
