// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

// smallRegTile8x32Asm is the 8-row × 32-column register tile in assembly (avx512_tile_amd64.s):
// the compiler's fused multiply-add (VFMADD213PS) writes its result over the broadcast operand, so
// the Go tile copies and rotates its accumulators between registers at every k (about 50
// instructions for 8 multiply-adds); the assembly accumulates in place (VFMADD231PS) with 16
// accumulators, 20 instructions per 16 multiply-adds. Callers check bounds: l holds 8 rows of k
// at stride ldl, r k rows of 32 at stride ldr, o 8 rows of 32 at stride ldo (float32 elements).
//
//go:noescape
func smallRegTile8x32Asm(l *float32, ldl int, r *float32, ldr int, o *float32, ldo int, k int)

// smallRegTile8x32PfAsm is smallRegTile8x32Asm that also prefetches the cache lines of columns
// 32…63 of each of its k rows of r (the next column strip), which must lie inside r. Same bits.
//
//go:noescape
func smallRegTile8x32PfAsm(l *float32, ldl int, r *float32, ldr int, o *float32, ldo int, k int)

// smallRegTile8x32 computes output rows 0–7 (of o, row stride N), columns j…j+31: l holds the eight
// lhs rows (K each). Each element is the same fused multiply-add chain as smallRegTile4x32's.
func smallRegTile8x32(l, r, o []float32, j, N, K int) {
	if K == 0 {
		for i := range 8 {
			clear(o[i*N+j : i*N+j+32])
		}
		return
	}
	_ = l[8*K-1]
	_ = r[(K-1)*N+j+31]
	_ = o[7*N+j+31]
	smallRegTile8x32Asm(&l[0], K, &r[j], N, &o[j], N, K)
}

// smallRegTile8x32Next is smallRegTile8x32 that also prefetches the next strip's columns j+32…j+63
// of r's K rows when they exist (Temper fork: smallRegColumns calls it for a strip's last row tile).
func smallRegTile8x32Next(l, r, o []float32, j, N, K int) {
	if K == 0 || j+64 > N {
		smallRegTile8x32(l, r, o, j, N, K)
		return
	}
	_ = l[8*K-1]
	_ = r[(K-1)*N+j+63]
	_ = o[7*N+j+31]
	smallRegTile8x32PfAsm(&l[0], K, &r[j], N, &o[j], N, K)
}

// largeTile4x32Asm is the packing kernel's 4 × 32 micro-tile in assembly (see avx512LargeKernelFloat32
// for the packed layouts), for the same reason as smallRegTile8x32Asm. Callers check bounds.
//
//go:noescape
func largeTile4x32Asm(lhs *float32, rhs *float32, o *float32, ldo int, k int)

// rowPair2x64Asm and rowPair2x32Asm are smallRegRowPair's 64- and 32-column blocks in assembly (decode
// attention: two query rows per head group), for the same reason as smallRegTile8x32Asm. Callers
// check bounds: l0 and l1 hold k values, r k rows of the block's columns at stride ldr, o0 and o1
// the block's columns.
//
//go:noescape
func rowPair2x64Asm(l0, l1, r *float32, ldr int, o0, o1 *float32, k int)

//go:noescape
func rowPair2x32Asm(l0, l1, r *float32, ldr int, o0, o1 *float32, k int)
