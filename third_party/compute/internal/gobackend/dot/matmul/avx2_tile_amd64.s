// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// func avx2RegTile6x16Asm(l *float32, ldl int, r *float32, ldr int, o *float32, ldo int, k int)
//
// o[i][c] = Σ_{k'<k} l[i·ldl + k'] · r[k'·ldr + c] for rows i < 6 and columns c < 16 (strides in
// float32 elements). Twelve ymm accumulators, each one fused multiply-add chain over k' in order
// starting from zero: the same bits as avx2RegTile4x16 for the same element.
TEXT ·avx2RegTile6x16Asm(SB), NOSPLIT, $0-56
	MOVQ l+0(FP), SI
	MOVQ ldl+8(FP), R8
	MOVQ r+16(FP), BX
	MOVQ ldr+24(FP), R10
	MOVQ o+32(FP), DI
	MOVQ ldo+40(FP), R11
	MOVQ k+48(FP), CX
	SHLQ $2, R8
	SHLQ $2, R10
	SHLQ $2, R11
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R9*1), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JEQ store

loop:
	VMOVUPS (BX), Y12
	VMOVUPS 32(BX), Y13
	VBROADCASTSS (SI), Y14
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(R8*2), Y14
	VBROADCASTSS (DX), Y15
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (DX)(R8*1), Y14
	VBROADCASTSS (DX)(R8*2), Y15
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R10, BX
	DECQ CX
	JNE loop

store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y10, (DI)
	VMOVUPS Y11, 32(DI)
	VZEROUPPER
	RET

// func avx2LargeTile4x16Asm(lhs *float32, rhs *float32, o *float32, ldo int, k int)
//
// The AVX2 packing kernel's micro-tile: lhs packed k-major with 4 rows per k, rhs k-major with 16
// columns per k; o[i·ldo + c] = Σ_{k'<k} lhs[4k'+i]·rhs[16k'+c]. Eight accumulators, each one fused
// multiply-add chain over k' in order from zero, as the Go kernel.
TEXT ·avx2LargeTile4x16Asm(SB), NOSPLIT, $0-40
	MOVQ lhs+0(FP), SI
	MOVQ rhs+8(FP), BX
	MOVQ o+16(FP), DI
	MOVQ ldo+24(FP), R11
	MOVQ k+32(FP), CX
	SHLQ $2, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ CX, CX
	JEQ lstore

lloop:
	VMOVUPS (BX), Y8
	VMOVUPS 32(BX), Y9
	VBROADCASTSS (SI), Y10
	VBROADCASTSS 4(SI), Y11
	VBROADCASTSS 8(SI), Y12
	VBROADCASTSS 12(SI), Y13
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ $16, SI
	ADDQ $64, BX
	DECQ CX
	JNE lloop

lstore:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, 32(DI)
	VZEROUPPER
	RET

// func avx2RowPair2x32Asm(l0, l1, r *float32, ldr int, o0, o1 *float32, k int)
//
// Two output rows × 32 columns with eight ymm accumulators, each one fused multiply-add chain over
// k' in order from zero, as avx2RegRowPair's.
TEXT ·avx2RowPair2x32Asm(SB), NOSPLIT, $0-56
	MOVQ l0+0(FP), SI
	MOVQ l1+8(FP), DX
	MOVQ r+16(FP), BX
	MOVQ ldr+24(FP), R10
	MOVQ o0+32(FP), DI
	MOVQ o1+40(FP), R11
	MOVQ k+48(FP), CX
	SHLQ $2, R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ CX, CX
	JEQ pstore

ploop:
	VMOVUPS (BX), Y8
	VMOVUPS 32(BX), Y9
	VMOVUPS 64(BX), Y10
	VMOVUPS 96(BX), Y11
	VBROADCASTSS (SI), Y12
	VBROADCASTSS (DX), Y13
	VFMADD231PS Y8, Y12, Y0
	VFMADD231PS Y9, Y12, Y1
	VFMADD231PS Y10, Y12, Y2
	VFMADD231PS Y11, Y12, Y3
	VFMADD231PS Y8, Y13, Y4
	VFMADD231PS Y9, Y13, Y5
	VFMADD231PS Y10, Y13, Y6
	VFMADD231PS Y11, Y13, Y7
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R10, BX
	DECQ CX
	JNE ploop

pstore:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, (R11)
	VMOVUPS Y5, 32(R11)
	VMOVUPS Y6, 64(R11)
	VMOVUPS Y7, 96(R11)
	VZEROUPPER
	RET

// func avx2PanelTile6x16Asm(l *float32, ldl int, r *float32, o *float32, ldo int, k int, add int)
//
// The panel kernel's micro-tile (avx2PanelFloat32): six lhs rows read in place at stride ldl, the
// rhs packed k-major with 16 columns per k (as avx2PackRHSNonTransposed and unsafePackLHS write it).
// Twelve accumulators, each one fused multiply-add chain over k' in order from zero (the packing
// kernel's chain over one contracting panel); then o = acc when add is 0, o = acc + o otherwise (the
// packing kernel's avx2ApplyPackedOutputFloat32, same operand order).
TEXT ·avx2PanelTile6x16Asm(SB), NOSPLIT, $0-56
	MOVQ l+0(FP), SI
	MOVQ ldl+8(FP), R8
	MOVQ r+16(FP), BX
	MOVQ o+24(FP), DI
	MOVQ ldo+32(FP), R11
	MOVQ k+40(FP), CX
	SHLQ $2, R8
	SHLQ $2, R11
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R9*1), DX
	// Fetch the output tile's lines while the sums run: it is stored (or read and added) only
	// after the loop, and misses there stalled the tile for hundreds of cycles.
	MOVQ DI, AX
	PREFETCHT0 (AX)
	PREFETCHT0 60(AX)
	PREFETCHT0 (AX)(R11*1)
	PREFETCHT0 60(AX)(R11*1)
	PREFETCHT0 (AX)(R11*2)
	PREFETCHT0 60(AX)(R11*2)
	LEAQ (AX)(R11*2), AX
	LEAQ (AX)(R11*1), AX
	PREFETCHT0 (AX)
	PREFETCHT0 60(AX)
	PREFETCHT0 (AX)(R11*1)
	PREFETCHT0 60(AX)(R11*1)
	PREFETCHT0 (AX)(R11*2)
	PREFETCHT0 60(AX)(R11*2)
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ CX, CX
	JEQ pstore

ploop:
	VMOVUPS (BX), Y12
	VMOVUPS 32(BX), Y13
	VBROADCASTSS (SI), Y14
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(R8*2), Y14
	VBROADCASTSS (DX), Y15
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (DX)(R8*1), Y14
	VBROADCASTSS (DX)(R8*2), Y15
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ $64, BX
	DECQ CX
	JNE ploop

pstore:
	MOVQ add+48(FP), AX
	TESTQ AX, AX
	JEQ pput
	VADDPS (DI), Y0, Y0
	VADDPS 32(DI), Y1, Y1
	ADDQ R11, DI
	VADDPS (DI), Y2, Y2
	VADDPS 32(DI), Y3, Y3
	ADDQ R11, DI
	VADDPS (DI), Y4, Y4
	VADDPS 32(DI), Y5, Y5
	ADDQ R11, DI
	VADDPS (DI), Y6, Y6
	VADDPS 32(DI), Y7, Y7
	ADDQ R11, DI
	VADDPS (DI), Y8, Y8
	VADDPS 32(DI), Y9, Y9
	ADDQ R11, DI
	VADDPS (DI), Y10, Y10
	VADDPS 32(DI), Y11, Y11
	MOVQ o+24(FP), DI

pput:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	ADDQ R11, DI
	VMOVUPS Y10, (DI)
	VMOVUPS Y11, 32(DI)
	VZEROUPPER
	RET
