// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"simd/archsimd"

	"github.com/gomlx/compute/internal/gobackend"
)

// avx2SmallRegFloat32 is the AVX2 (8-lane) twin of avx512SmallRegFloat32: the non-transposed small
// matmul (lhs [M, K], rhs [K, N], output [M, N] per batch item) with each output tile summed over
// all of K in registers and stored once. The kernel it replaces loaded and stored the tile at every
// k. Each output element is the same fused multiply-add chain over k = 0…K-1 in order (starting from
// zero) as before, so whole vectors of columns give the same bits. AVX2 has 16 vector registers:
// tiles hold at most eight accumulators.
func avx2SmallRegFloat32(lhs, rhs []float32, batchStart, batchCount, M, N, K int, output []float32) {
	defer archsimd.ClearAVXUpperBits()
	for b := batchStart; b < batchStart+batchCount; b++ {
		avx2RegColumns(lhs[b*M*K:(b+1)*M*K], rhs[b*K*N:(b+1)*K*N], output[b*M*N:(b+1)*M*N], M, N, K, 0, N)
	}
}

// avx2RegColumns computes output columns [j0, j1) of one batch item (j0 a multiple of 16), so that
// one product can be split by columns across workers: each reads only its columns of rhs.
func avx2RegColumns(l, r, o []float32, M, N, K, j0, j1 int) {
	M6 := M - M%6
	M4 := M6 + (M-M6)/4*4
	// Column strips outside, row tiles inside, so a strip of rhs stays in L1 across row tiles.
	j := j0
	for ; j+16 <= j1; j += 16 {
		for i := 0; i < M6; i += 6 {
			avx2RegTile6x16(l[i*K:(i+6)*K], r, o[i*N:(i+6)*N], j, N, K)
		}
		for i := M6; i < M4; i += 4 {
			avx2RegTile4x16(l[i*K:(i+4)*K], r, o[i*N:(i+4)*N], j, N, K)
		}
	}
	if j < j1 { // fewer than 16 columns left: one row at a time (8 columns, then a partial vector)
		for i := range M4 {
			avx2RegRow(l[i*K:(i+1)*K], r[j:], o[i*N+j:(i+1)*N], j1-j, K, N)
		}
	}
	i := M4
	for ; i+2 <= M; i += 2 {
		avx2RegRowPair(l[i*K:(i+1)*K], l[(i+1)*K:(i+2)*K], r[j0:], o[i*N+j0:(i+1)*N], o[(i+1)*N+j0:(i+2)*N], j1-j0, K, N)
	}
	for ; i < M; i++ {
		avx2RegRow(l[i*K:(i+1)*K], r[j0:], o[i*N+j0:(i+1)*N], j1-j0, K, N)
	}
}

// avx2RegTile4x16 computes output rows 0–3 (of o, row stride N), columns j…j+15.
func avx2RegTile4x16(l, r, o []float32, j, N, K int) {
	l0, l1, l2, l3 := l[:K], l[K:2*K], l[2*K:3*K], l[3*K:4*K]
	var a00, a01, a10, a11, a20, a21, a30, a31 archsimd.Float32x8
	for k := range K {
		rk := r[k*N+j : k*N+j+16]
		r0 := archsimd.LoadFloat32x8((*[8]float32)(rk[:8]))
		r1 := archsimd.LoadFloat32x8((*[8]float32)(rk[8:16]))
		b0 := archsimd.BroadcastFloat32x8(l0[k])
		a00, a01 = b0.MulAdd(r0, a00), b0.MulAdd(r1, a01)
		b1 := archsimd.BroadcastFloat32x8(l1[k])
		a10, a11 = b1.MulAdd(r0, a10), b1.MulAdd(r1, a11)
		b2 := archsimd.BroadcastFloat32x8(l2[k])
		a20, a21 = b2.MulAdd(r0, a20), b2.MulAdd(r1, a21)
		b3 := archsimd.BroadcastFloat32x8(l3[k])
		a30, a31 = b3.MulAdd(r0, a30), b3.MulAdd(r1, a31)
	}
	a00.Store((*[8]float32)(o[j : j+8]))
	a01.Store((*[8]float32)(o[j+8 : j+16]))
	a10.Store((*[8]float32)(o[N+j : N+j+8]))
	a11.Store((*[8]float32)(o[N+j+8 : N+j+16]))
	a20.Store((*[8]float32)(o[2*N+j : 2*N+j+8]))
	a21.Store((*[8]float32)(o[2*N+j+8 : 2*N+j+16]))
	a30.Store((*[8]float32)(o[3*N+j : 3*N+j+8]))
	a31.Store((*[8]float32)(o[3*N+j+8 : 3*N+j+16]))
}

// avx2RegRowPair computes two output rows 32, then 16 columns at a time (eight or four
// accumulators), then the rest row by row.
func avx2RegRowPair(l0, l1, r, o0, o1 []float32, n, K, stride int) {
	j := 0
	if K > 0 {
		_, _ = l0[K-1], l1[K-1]
		for ; j+32 <= n; j += 32 {
			_, _, _ = r[(K-1)*stride+j+31], o0[j+31], o1[j+31]
			avx2RowPair2x32Asm(&l0[0], &l1[0], &r[j], stride, &o0[j], &o1[j], K)
		}
	}
	for ; j+16 <= n; j += 16 {
		var a00, a01, a10, a11 archsimd.Float32x8
		for k := range K {
			rk := r[k*stride+j : k*stride+j+16]
			r0 := archsimd.LoadFloat32x8((*[8]float32)(rk[:8]))
			r1 := archsimd.LoadFloat32x8((*[8]float32)(rk[8:16]))
			b0 := archsimd.BroadcastFloat32x8(l0[k])
			a00, a01 = b0.MulAdd(r0, a00), b0.MulAdd(r1, a01)
			b1 := archsimd.BroadcastFloat32x8(l1[k])
			a10, a11 = b1.MulAdd(r0, a10), b1.MulAdd(r1, a11)
		}
		a00.Store((*[8]float32)(o0[j : j+8]))
		a01.Store((*[8]float32)(o0[j+8 : j+16]))
		a10.Store((*[8]float32)(o1[j : j+8]))
		a11.Store((*[8]float32)(o1[j+8 : j+16]))
	}
	if j < n {
		avx2RegRow(l0, r[j:], o0[j:], n-j, K, stride)
		avx2RegRow(l1, r[j:], o1[j:], n-j, K, stride)
	}
}

// avx2RegRow computes one output row of n columns (rhs row stride stride), four accumulators per
// 32 columns.
func avx2RegRow(li, r, out []float32, n, K, stride int) {
	j := 0
	for ; j+32 <= n; j += 32 {
		var a0, a1, a2, a3 archsimd.Float32x8
		for k := range K {
			rk := r[k*stride+j : k*stride+j+32]
			b := archsimd.BroadcastFloat32x8(li[k])
			a0 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(rk[:8])), a0)
			a1 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(rk[8:16])), a1)
			a2 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(rk[16:24])), a2)
			a3 = b.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(rk[24:32])), a3)
		}
		a0.Store((*[8]float32)(out[j : j+8]))
		a1.Store((*[8]float32)(out[j+8 : j+16]))
		a2.Store((*[8]float32)(out[j+16 : j+24]))
		a3.Store((*[8]float32)(out[j+24 : j+32]))
	}
	for ; j+8 <= n; j += 8 {
		var a archsimd.Float32x8
		for k := range K {
			a = archsimd.BroadcastFloat32x8(li[k]).MulAdd(archsimd.LoadFloat32x8((*[8]float32)(r[k*stride+j:k*stride+j+8])), a)
		}
		a.Store((*[8]float32)(out[j : j+8]))
	}
	avx2RegTail(li, r, out, j, n, K, stride)
}

// avx2RegTail computes out[j0:n] (fewer than 8 columns) of one row with a partial vector.
func avx2RegTail(li, r, out []float32, j0, n, K, stride int) {
	if j0 >= n {
		return
	}
	var a archsimd.Float32x8
	for k := range K {
		a = archsimd.BroadcastFloat32x8(li[k]).MulAdd(archsimd.LoadFloat32x8SlicePart(r[k*stride+j0:k*stride+n]), a)
	}
	a.StoreSlicePart(out[j0:n])
}

// avx2SmallRegByColumns is avx512SmallRegByColumns for AVX2: column ranges of whole 16-column strips.
// Each output element is computed exactly as by avx2SmallRegFloat32.
func avx2SmallRegByColumns(backend *gobackend.Backend, lhs, rhs []float32, batchSize, M, N, K int, output []float32, workers int) {
	regByColumns(backend, lhs, rhs, batchSize, M, N, K, output, workers, 16, avx2RegColumns)
}
