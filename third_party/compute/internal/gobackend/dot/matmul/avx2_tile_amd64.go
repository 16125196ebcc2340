// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

// avx2RegTile6x16Asm is the 6-row × 16-column register tile in assembly (avx2_tile_amd64.s), for
// the same reason as smallRegTile8x32Asm: twelve accumulators updated in place (VFMADD231PS) where
// the compiler's tile copies and rotates registers at every k. Callers check bounds: l holds 6 rows
// of k at stride ldl, r k rows of 16 at stride ldr, o 6 rows of 16 at stride ldo (float32 elements).
//
//go:noescape
func avx2RegTile6x16Asm(l *float32, ldl int, r *float32, ldr int, o *float32, ldo int, k int)

// avx2RegTile6x16 computes output rows 0–5 (of o, row stride N), columns j…j+15: l holds the six lhs
// rows (K each). Each element is the same fused multiply-add chain as avx2RegTile4x16's.
func avx2RegTile6x16(l, r, o []float32, j, N, K int) {
	if K == 0 {
		for i := range 6 {
			clear(o[i*N+j : i*N+j+16])
		}
		return
	}
	_ = l[6*K-1]
	_ = r[(K-1)*N+j+15]
	_ = o[5*N+j+15]
	avx2RegTile6x16Asm(&l[0], K, &r[j], N, &o[j], N, K)
}

// avx2LargeTile4x16Asm is the AVX2 packing kernel's 4 × 16 micro-tile in assembly (see
// avx2LargeKernelFloat32 for the packed layouts), for the same reason as avx2RegTile6x16Asm. Callers
// check bounds.
//
//go:noescape
func avx2LargeTile4x16Asm(lhs *float32, rhs *float32, o *float32, ldo int, k int)

// avx2RowPair2x32Asm is avx2RegRowPair's 32-column block in assembly (decode attention), for the same
// reason as avx2RegTile6x16Asm. Callers check bounds.
//
//go:noescape
func avx2RowPair2x32Asm(l0, l1, r *float32, ldr int, o0, o1 *float32, k int)

// avx2PanelTile6x16Asm is the AVX2 panel kernel's tile (panelKernel): six lhs rows in place, the rhs
// packed 16 columns per k, the sum stored or added to o. Callers check bounds.
//
//go:noescape
func avx2PanelTile6x16Asm(l *float32, ldl int, r *float32, o *float32, ldo int, k int, add int)
