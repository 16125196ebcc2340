// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// func smallRegTile8x32Asm(l *float32, ldl int, r *float32, ldr int, o *float32, ldo int, k int)
//
// o[i][c] = Σ_{k'<k} l[i·ldl + k'] · r[k'·ldr + c] for rows i < 8 and columns c < 32 (strides in
// float32 elements). Sixteen zmm accumulators; each is one fused multiply-add chain over k' in
// order, starting from zero: the same bits as smallRegTile4x32 for the same element.
TEXT ·smallRegTile8x32Asm(SB), NOSPLIT, $0-56
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
	LEAQ (SI)(R8*4), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	TESTQ CX, CX
	JEQ store

loop:
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VBROADCASTSS (SI), Z18
	VBROADCASTSS (SI)(R8*1), Z19
	VBROADCASTSS (SI)(R8*2), Z20
	VBROADCASTSS (SI)(R9*1), Z21
	VFMADD231PS Z16, Z18, Z0
	VFMADD231PS Z17, Z18, Z1
	VFMADD231PS Z16, Z19, Z2
	VFMADD231PS Z17, Z19, Z3
	VFMADD231PS Z16, Z20, Z4
	VFMADD231PS Z17, Z20, Z5
	VFMADD231PS Z16, Z21, Z6
	VFMADD231PS Z17, Z21, Z7
	VBROADCASTSS (DX), Z22
	VBROADCASTSS (DX)(R8*1), Z23
	VBROADCASTSS (DX)(R8*2), Z24
	VBROADCASTSS (DX)(R9*1), Z25
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z16, Z23, Z10
	VFMADD231PS Z17, Z23, Z11
	VFMADD231PS Z16, Z24, Z12
	VFMADD231PS Z17, Z24, Z13
	VFMADD231PS Z16, Z25, Z14
	VFMADD231PS Z17, Z25, Z15
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R10, BX
	DECQ CX
	JNE loop

store:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z2, (DI)
	VMOVUPS Z3, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z8, (DI)
	VMOVUPS Z9, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z10, (DI)
	VMOVUPS Z11, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z12, (DI)
	VMOVUPS Z13, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z14, (DI)
	VMOVUPS Z15, 64(DI)
	VZEROUPPER
	RET

// func largeTile4x32Asm(lhs *float32, rhs *float32, o *float32, ldo int, k int)
//
// The packing kernel's micro-tile: lhs is packed k-major with 4 rows per k (lhs[4k'+i]), rhs k-major
// with 32 columns per k (rhs[32k'+c]); o[i·ldo + c] = Σ_{k'<k} lhs[4k'+i]·rhs[32k'+c]. Eight
// accumulators, each one fused multiply-add chain over k' in order from zero, as the Go kernel.
TEXT ·largeTile4x32Asm(SB), NOSPLIT, $0-40
	MOVQ lhs+0(FP), SI
	MOVQ rhs+8(FP), BX
	MOVQ o+16(FP), DI
	MOVQ ldo+24(FP), R11
	MOVQ k+32(FP), CX
	SHLQ $2, R11
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	TESTQ CX, CX
	JEQ lstore

lloop:
	VMOVUPS (BX), Z16
	VMOVUPS 64(BX), Z17
	VBROADCASTSS (SI), Z18
	VBROADCASTSS 4(SI), Z19
	VBROADCASTSS 8(SI), Z20
	VBROADCASTSS 12(SI), Z21
	VFMADD231PS Z16, Z18, Z0
	VFMADD231PS Z17, Z18, Z1
	VFMADD231PS Z16, Z19, Z2
	VFMADD231PS Z17, Z19, Z3
	VFMADD231PS Z16, Z20, Z4
	VFMADD231PS Z17, Z20, Z5
	VFMADD231PS Z16, Z21, Z6
	VFMADD231PS Z17, Z21, Z7
	ADDQ $16, SI
	ADDQ $128, BX
	DECQ CX
	JNE lloop

lstore:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z2, (DI)
	VMOVUPS Z3, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, 64(DI)
	ADDQ R11, DI
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 64(DI)
	VZEROUPPER
	RET
