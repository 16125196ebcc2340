// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package ops

import (
	"simd/archsimd"
	"unsafe"

	"github.com/gomlx/compute/support/envutil"
)

// transpose8x8x32AVX2 is the 8×8 block of 4-byte elements in assembly (transpose_amd64.s): eight
// row loads, 24 register shuffles and eight row stores where the scalar block moves 64 elements one
// by one. Callers check bounds: src holds 8 rows of 8 at srcStride bytes, dst 8 rows of 8 at
// dstStride bytes.
//
//go:noescape
func transpose8x8x32AVX2(src unsafe.Pointer, srcStride uintptr, dst unsafe.Pointer, dstStride uintptr)

func init() {
	if archsimd.X86.AVX2() && envutil.MustReadBool(envutil.SIMD_AVX2_Env, true) {
		block8x8x32 = transpose8x8x32AVX2
	}
}
