// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"simd/archsimd"

	"github.com/gomlx/compute/support/envutil"
)

var stridedAVX2 = archsimd.X86.AVX2() && envutil.MustReadBool(envutil.SIMD_AVX2_Env, true)

// stridedVector is StridedFloat32 with AVX2 (the caller checked the bounds): whole 6-row × 16-column
// tiles in assembly, the remaining rows and columns one row at a time with (partial) vectors.
func stridedVector(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) bool {
	if !stridedAVX2 {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	m6 := m - m%6
	j := 0
	for ; j+16 <= n; j += 16 {
		for i := 0; i < m6; i += 6 {
			avx2RegTile6x16Asm(&a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, k)
		}
		for i := m6; i < m; i++ {
			stridedRow(a[i*lda:i*lda+k], b[j:], ldb, c[i*ldc+j:i*ldc+j+16], k)
		}
	}
	if j < n {
		for i := range m {
			stridedRow(a[i*lda:i*lda+k], b[j:], ldb, c[i*ldc+j:i*ldc+n], k)
		}
	}
	return true
}

// stridedRow sets out (1 to 16 columns) to the product of one row of a (k elements) with the
// first len(out) columns of b (row stride ldb): two accumulators, fused multiply-adds in k order.
func stridedRow(ai, b []float32, ldb int, out []float32, k int) {
	w := len(out)
	var a0, a1 archsimd.Float32x8
	if w == 16 {
		for kk := range k {
			bk := b[kk*ldb : kk*ldb+16]
			x := archsimd.BroadcastFloat32x8(ai[kk])
			a0 = x.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(bk[:8])), a0)
			a1 = x.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(bk[8:16])), a1)
		}
		a0.Store((*[8]float32)(out[:8]))
		a1.Store((*[8]float32)(out[8:16]))
		return
	}
	w0 := min(w, 8)
	for kk := range k {
		bk := b[kk*ldb : kk*ldb+w]
		x := archsimd.BroadcastFloat32x8(ai[kk])
		a0 = x.MulAdd(archsimd.LoadFloat32x8SlicePart(bk[:w0]), a0)
		if w > 8 {
			a1 = x.MulAdd(archsimd.LoadFloat32x8SlicePart(bk[8:w]), a1)
		}
	}
	a0.StoreSlicePart(out[:w0])
	if w > 8 {
		a1.StoreSlicePart(out[8:w])
	}
}
