// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"simd/archsimd"
)

// avx512SmallRegFloat32 is the non-transposed small matmul (lhs [M, K], rhs [K, N], output [M, N] per
// batch item) with the accumulators held in registers: a 4-row × 32-column tile sums over all of K
// before it is stored once. The kernel it replaces read and wrote the output tile at every k, which
// made decode-sized matmuls (64 rows, K of 128–384) bound on those loads and stores. Every output
// element is the same fused multiply-add chain over k = 0…K-1 in order as before (vector lanes
// and the scalar tail alike), so results do not change.
func avx512SmallRegFloat32(lhs, rhs []float32, batchStart, batchCount, M, N, K int, output []float32) {
	if M < 4 {
		// No 4-row tile to hold in registers (decode attention: one or two query rows per head
		// group): the previous kernel measured faster there.
		avx512SmallFloat32(lhs, rhs, batchStart, batchCount, M, N, K, output)
		return
	}
	defer archsimd.ClearAVXUpperBits()
	for b := batchStart; b < batchStart+batchCount; b++ {
		l := lhs[b*M*K : (b+1)*M*K]
		r := rhs[b*K*N : (b+1)*K*N]
		o := output[b*M*N : (b+1)*M*N]
		i := 0
		for ; i+4 <= M; i += 4 {
			l0, l1, l2, l3 := l[i*K:(i+1)*K], l[(i+1)*K:(i+2)*K], l[(i+2)*K:(i+3)*K], l[(i+3)*K:(i+4)*K]
			j := 0
			for ; j+32 <= N; j += 32 {
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
				a00.Store((*[16]float32)(o[i*N+j : i*N+j+16]))
				a01.Store((*[16]float32)(o[i*N+j+16 : i*N+j+32]))
				a10.Store((*[16]float32)(o[(i+1)*N+j : (i+1)*N+j+16]))
				a11.Store((*[16]float32)(o[(i+1)*N+j+16 : (i+1)*N+j+32]))
				a20.Store((*[16]float32)(o[(i+2)*N+j : (i+2)*N+j+16]))
				a21.Store((*[16]float32)(o[(i+2)*N+j+16 : (i+2)*N+j+32]))
				a30.Store((*[16]float32)(o[(i+3)*N+j : (i+3)*N+j+16]))
				a31.Store((*[16]float32)(o[(i+3)*N+j+16 : (i+3)*N+j+32]))
			}
			for ; j+16 <= N; j += 16 {
				var a0, a1, a2, a3 archsimd.Float32x16
				for k := range K {
					r0 := archsimd.LoadFloat32x16((*[16]float32)(r[k*N+j : k*N+j+16]))
					a0 = archsimd.BroadcastFloat32x16(l0[k]).MulAdd(r0, a0)
					a1 = archsimd.BroadcastFloat32x16(l1[k]).MulAdd(r0, a1)
					a2 = archsimd.BroadcastFloat32x16(l2[k]).MulAdd(r0, a2)
					a3 = archsimd.BroadcastFloat32x16(l3[k]).MulAdd(r0, a3)
				}
				a0.Store((*[16]float32)(o[i*N+j : i*N+j+16]))
				a1.Store((*[16]float32)(o[(i+1)*N+j : (i+1)*N+j+16]))
				a2.Store((*[16]float32)(o[(i+2)*N+j : (i+2)*N+j+16]))
				a3.Store((*[16]float32)(o[(i+3)*N+j : (i+3)*N+j+16]))
			}
			for ri := range 4 {
				smallRegTail(l[(i+ri)*K:(i+ri+1)*K], r, o[(i+ri)*N:(i+ri+1)*N], j, N, K)
			}
		}
		for ; i < M; i++ {
			li := l[i*K : (i+1)*K]
			j := 0
			for ; j+16 <= N; j += 16 {
				var a archsimd.Float32x16
				for k := range K {
					a = archsimd.BroadcastFloat32x16(li[k]).MulAdd(archsimd.LoadFloat32x16((*[16]float32)(r[k*N+j:k*N+j+16])), a)
				}
				a.Store((*[16]float32)(o[i*N+j : i*N+j+16]))
			}
			smallRegTail(li, r, o[i*N:(i+1)*N], j, N, K)
		}
	}
}

// smallRegTail computes out[j0:N] (fewer than 16 columns) of one row with a partial vector, so
// the tail's fused multiply-adds are the vector lanes' own.
func smallRegTail(li, r, out []float32, j0, N, K int) {
	if j0 >= N {
		return
	}
	var a archsimd.Float32x16
	for k := range K {
		a = archsimd.BroadcastFloat32x16(li[k]).MulAdd(archsimd.LoadFloat32x16SlicePart(r[k*N+j0:k*N+N]), a)
	}
	a.StoreSlicePart(out[j0:N])
}
