// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"simd/archsimd"

	"github.com/gomlx/compute/internal/gobackend"
)

// avx512SmallRegFloat32 is the non-transposed small matmul (lhs [M, K], rhs [K, N], output [M, N] per
// batch item) with the accumulators held in registers: a 4-row × 32-column tile sums over all of K
// before it is stored once. The kernel it replaces read and wrote the output tile at every k, which
// made decode-sized matmuls (64 rows, K of 128–384) bound on those loads and stores. Every output
// element is the same fused multiply-add chain over k = 0…K-1 in order as before (vector lanes
// and the scalar tail alike), so results do not change.
func avx512SmallRegFloat32(lhs, rhs []float32, batchStart, batchCount, M, N, K int, output []float32) {
	defer archsimd.ClearAVXUpperBits()
	for b := batchStart; b < batchStart+batchCount; b++ {
		smallRegColumns(lhs[b*M*K:(b+1)*M*K], rhs[b*K*N:(b+1)*K*N], output[b*M*N:(b+1)*M*N], M, N, K, 0, N)
	}
}

// smallRegColumns computes output columns [j0, j1) of one batch item (j0 a multiple of 16), so that
// one product can be split by columns across workers: each reads only its columns of rhs.
func smallRegColumns(l, r, o []float32, M, N, K, j0, j1 int) {
	M4 := M - M%4
	// Column strips outside, row tiles inside: a strip of rhs (K × 32) stays in L1 while every
	// row tile uses it, so a weight larger than the caches is read from memory once, not once
	// per row tile (decode's 64-row products with base-sized weights).
	//
	// Temper fork: the strip's last row tile prefetches the next strip (smallRegTile8x32Next). A
	// strip's k rows lie N floats apart, one page or more for decode's wide weights, so the
	// hardware prefetchers do not follow them and the first row tile of each strip waited on
	// memory for every row; prefetched one tile ahead, they arrive while it computes. With weights
	// that come from memory (as in a decode step, whose weights exceed the last-level cache), one
	// thread of `[64,384]×[384,N]`: N 384 158 → 207 GFLOP/s, N 1024 151 → 175, N 2048 154 → 176;
	// the same with weights already in cache.
	M8 := M - M%8
	j := j0
	for ; j+32 <= j1; j += 32 {
		for i := 0; i < M8; i += 8 {
			if i == M8-8 {
				smallRegTile8x32Next(l[i*K:(i+8)*K], r, o[i*N:(i+8)*N], j, N, K)
				continue
			}
			smallRegTile8x32(l[i*K:(i+8)*K], r, o[i*N:(i+8)*N], j, N, K)
		}
		for i := M8; i < M4; i += 4 {
			smallRegTile4x32(l[i*K:(i+4)*K], r, o[i*N:(i+4)*N], j, N, K)
		}
	}
	for ; j+16 <= j1; j += 16 {
		for i := 0; i < M4; i += 4 {
			smallRegTile4x16(l[i*K:(i+4)*K], r, o[i*N:(i+4)*N], j, N, K)
		}
	}
	for i := range M4 {
		smallRegTail(l[i*K:(i+1)*K], r, o[i*N:(i+1)*N], j, j1, K, N)
	}
	i := M4
	for ; i+2 <= M; i += 2 {
		smallRegRowPair(l[i*K:(i+1)*K], l[(i+1)*K:(i+2)*K], r[j0:], o[i*N+j0:(i+1)*N], o[(i+1)*N+j0:(i+2)*N], j1-j0, K, N)
	}
	for ; i < M; i++ {
		smallRegRow(l[i*K:(i+1)*K], r[j0:], o[i*N+j0:(i+1)*N], j1-j0, K, N)
	}
}

// smallRegTile4x32 computes output rows 0–3 (of o, row stride N), columns j…j+31: l holds the four
// lhs rows (K each).
func smallRegTile4x32(l, r, o []float32, j, N, K int) {
	l0, l1, l2, l3 := l[:K], l[K:2*K], l[2*K:3*K], l[3*K:4*K]
	var a00, a01, a10, a11, a20, a21, a30, a31 archsimd.Float32x16
	for k := range K {
		rk := r[k*N+j : k*N+j+32]
		r0 := archsimd.LoadFloat32x16((*[16]float32)(rk[:16]))
		r1 := archsimd.LoadFloat32x16((*[16]float32)(rk[16:32]))
		b0 := archsimd.BroadcastFloat32x16(l0[k])
		a00, a01 = b0.MulAdd(r0, a00), b0.MulAdd(r1, a01)
		b1 := archsimd.BroadcastFloat32x16(l1[k])
		a10, a11 = b1.MulAdd(r0, a10), b1.MulAdd(r1, a11)
		b2 := archsimd.BroadcastFloat32x16(l2[k])
		a20, a21 = b2.MulAdd(r0, a20), b2.MulAdd(r1, a21)
		b3 := archsimd.BroadcastFloat32x16(l3[k])
		a30, a31 = b3.MulAdd(r0, a30), b3.MulAdd(r1, a31)
	}
	a00.Store((*[16]float32)(o[j : j+16]))
	a01.Store((*[16]float32)(o[j+16 : j+32]))
	a10.Store((*[16]float32)(o[N+j : N+j+16]))
	a11.Store((*[16]float32)(o[N+j+16 : N+j+32]))
	a20.Store((*[16]float32)(o[2*N+j : 2*N+j+16]))
	a21.Store((*[16]float32)(o[2*N+j+16 : 2*N+j+32]))
	a30.Store((*[16]float32)(o[3*N+j : 3*N+j+16]))
	a31.Store((*[16]float32)(o[3*N+j+16 : 3*N+j+32]))
}

// smallRegTile4x16 is smallRegTile4x32 for one vector of columns.
func smallRegTile4x16(l, r, o []float32, j, N, K int) {
	l0, l1, l2, l3 := l[:K], l[K:2*K], l[2*K:3*K], l[3*K:4*K]
	var a0, a1, a2, a3 archsimd.Float32x16
	for k := range K {
		r0 := archsimd.LoadFloat32x16((*[16]float32)(r[k*N+j : k*N+j+16]))
		a0 = archsimd.BroadcastFloat32x16(l0[k]).MulAdd(r0, a0)
		a1 = archsimd.BroadcastFloat32x16(l1[k]).MulAdd(r0, a1)
		a2 = archsimd.BroadcastFloat32x16(l2[k]).MulAdd(r0, a2)
		a3 = archsimd.BroadcastFloat32x16(l3[k]).MulAdd(r0, a3)
	}
	a0.Store((*[16]float32)(o[j : j+16]))
	a1.Store((*[16]float32)(o[N+j : N+j+16]))
	a2.Store((*[16]float32)(o[2*N+j : 2*N+j+16]))
	a3.Store((*[16]float32)(o[3*N+j : 3*N+j+16]))
}

// smallRegRowPair computes two output rows 64, then 32 columns at a time (eight or four
// accumulators, in assembly; decode attention's weighted sum of values has only head_dim columns),
// then the rest row by row.
func smallRegRowPair(l0, l1, r, o0, o1 []float32, n, K, stride int) {
	j := 0
	if K > 0 {
		_, _ = l0[K-1], l1[K-1]
		for ; j+64 <= n; j += 64 {
			_, _, _ = r[(K-1)*stride+j+63], o0[j+63], o1[j+63]
			rowPair2x64Asm(&l0[0], &l1[0], &r[j], stride, &o0[j], &o1[j], K)
		}
		for ; j+32 <= n; j += 32 {
			_, _, _ = r[(K-1)*stride+j+31], o0[j+31], o1[j+31]
			rowPair2x32Asm(&l0[0], &l1[0], &r[j], stride, &o0[j], &o1[j], K)
		}
	}
	if j < n {
		smallRegRow(l0, r[j:], o0[j:], n-j, K, stride)
		smallRegRow(l1, r[j:], o1[j:], n-j, K, stride)
	}
}

// smallRegRow computes one output row (fewer than 4 rows left, or decode attention's one or two
// query rows per head group) with four accumulators per 64 columns, so the fused multiply-adds of
// a column block overlap instead of waiting on one accumulator's latency at every k.
func smallRegRow(li, r, out []float32, n, K, stride int) {
	j := 0
	for ; j+64 <= n; j += 64 {
		var a0, a1, a2, a3 archsimd.Float32x16
		for k := range K {
			rk := r[k*stride+j : k*stride+j+64]
			b := archsimd.BroadcastFloat32x16(li[k])
			a0 = b.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(rk[:16])), a0)
			a1 = b.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(rk[16:32])), a1)
			a2 = b.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(rk[32:48])), a2)
			a3 = b.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(rk[48:64])), a3)
		}
		a0.Store((*[16]float32)(out[j : j+16]))
		a1.Store((*[16]float32)(out[j+16 : j+32]))
		a2.Store((*[16]float32)(out[j+32 : j+48]))
		a3.Store((*[16]float32)(out[j+48 : j+64]))
	}
	for ; j+32 <= n; j += 32 {
		var a0, a1 archsimd.Float32x16
		for k := range K {
			rk := r[k*stride+j : k*stride+j+32]
			b := archsimd.BroadcastFloat32x16(li[k])
			a0 = b.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(rk[:16])), a0)
			a1 = b.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(rk[16:32])), a1)
		}
		a0.Store((*[16]float32)(out[j : j+16]))
		a1.Store((*[16]float32)(out[j+16 : j+32]))
	}
	for ; j+16 <= n; j += 16 {
		var a archsimd.Float32x16
		for k := range K {
			a = archsimd.BroadcastFloat32x16(li[k]).MulAdd(archsimd.LoadFloat32x16((*[16]float32)(r[k*stride+j:k*stride+j+16])), a)
		}
		a.Store((*[16]float32)(out[j : j+16]))
	}
	smallRegTail(li, r, out, j, n, K, stride)
}

// smallRegTail computes out[j0:N] (fewer than 16 columns) of one row with a partial vector, so
// the tail's fused multiply-adds are the vector lanes' own.
func smallRegTail(li, r, out []float32, j0, n, K, stride int) {
	if j0 >= n {
		return
	}
	var a archsimd.Float32x16
	for k := range K {
		a = archsimd.BroadcastFloat32x16(li[k]).MulAdd(archsimd.LoadFloat32x16SlicePart(r[k*stride+j0:k*stride+n]), a)
	}
	a.StoreSlicePart(out[j0:n])
}

// avx512SmallRegByColumns runs the register-blocked product with fewer batch items than workers
// (decode: one) split by column ranges of whole 32-column strips, so every worker reads only its
// share of rhs. Each output element is computed exactly as by avx512SmallRegFloat32.
func avx512SmallRegByColumns(backend *gobackend.Backend, lhs, rhs []float32, batchSize, M, N, K int, output []float32, workers int) {
	if batchSize == 1 && decodeByStrips { // Temper fork: avx512_strips_amd64.go
		avx512DecodeByStrips(backend, lhs, rhs, M, N, K, output, workers)
		return
	}
	regByColumns(backend, lhs, rhs, batchSize, M, N, K, output, workers, 32, smallRegColumns)
}

// regByColumns splits a product of batchSize items into column ranges of whole strips of the given
// width and runs columns (an ISA's register-blocked kernel for columns [j0, j1) of one item) on them
// across the workers.
func regByColumns(backend *gobackend.Backend, lhs, rhs []float32, batchSize, M, N, K int, output []float32, workers, strip int,
	columns func(l, r, o []float32, M, N, K, j0, j1 int)) {
	// Four items per worker, so a worker that starts late (a sleeping thread) takes fewer.
	per := max(strip, ((N+4*workers-1)/(4*workers)+strip-1)/strip*strip)
	type item struct{ b, j0, j1 int }
	work := make(chan item, batchSize*((N+per-1)/per))
	for b := range batchSize {
		for j0 := 0; j0 < N; j0 += per {
			work <- item{b, j0, min(N, j0+per)}
		}
	}
	close(work)
	backend.Workers.Saturate(func() {
		defer archsimd.ClearAVXUpperBits()
		for it := range work {
			b := it.b
			columns(lhs[b*M*K:(b+1)*M*K], rhs[b*K*N:(b+1)*K*N], output[b*M*N:(b+1)*M*N], M, N, K, it.j0, it.j1)
		}
	})
}
