// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package matmul

// StridedFloat32 sets c = a·b on the calling goroutine, for a [m, k] with row stride lda, b [k, n]
// with row stride ldb and c [m, n] with row stride ldc (strides in elements). It is the block
// product of kernels that work on tiles of larger tensors (the blocked attention of fusedops),
// which the DotGeneral paths cannot address without copying the tiles out first.
//
// With AVX2 every element is one fused multiply-add chain over k in order, starting from zero,
// whichever tile or edge loop computes it (the 6 × 16 assembly tile of the small kernel, or a
// vector row with partial loads at the edges): an element's bits do not depend on m, n, its
// position, or on which operand is a and which b (a·b and bᵀ·aᵀ give the same bits). Without
// AVX2 (or with GOMLX_SIMD_AVX2=false) it is a plain loop, deterministic but with other bits.
func StridedFloat32(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	if k <= 0 {
		for i := range m {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	// One bounds check for the whole product: the kernels below index within these.
	_ = a[(m-1)*lda+k-1]
	_ = b[(k-1)*ldb+n-1]
	_ = c[(m-1)*ldc+n-1]
	if stridedVector(m, n, k, a, lda, b, ldb, c, ldc) {
		return
	}
	for i := range m {
		ai := a[i*lda : i*lda+k]
		ci := c[i*ldc : i*ldc+n]
		clear(ci)
		for kk, x := range ai {
			bk := b[kk*ldb : kk*ldb+n]
			for j, y := range bk {
				ci[j] += x * y
			}
		}
	}
}
