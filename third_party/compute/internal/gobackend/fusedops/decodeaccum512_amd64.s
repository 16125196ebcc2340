// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// The decode attention's weighted sum of values with AVX-512 (flashvec512_amd64.go:
// groupAccumulate512): the two or three query rows of output stay in zmm registers (head_dim 32 or
// 64: two or four per row) over all the visible keys, and each value row is read once, whole, for
// all of them, in increasing key order. Each output element is vecAxpy's chain: o[i] += the
// rounded product p[t]·v[i] (VMULPS, then VADDPS: no fused multiply-add), key after key, so the
// bits are the scalar loop's. (The Go version of this loop spilled its accumulators: the compiler
// allocates sixteen vector registers.)
//
// Registers: DI output rows, BX values, SI vis, R9 the weights of row 0 (row r at R9 + r·R10), CX
// keys left, R8 the byte offset of the key's value row. Z0..Z11 accumulators (row r, 16 columns i:
// Z(r·d/16 + i)), Z12..Z14 the broadcast weights, Z16..Z19 the value row, Z20..Z31 products.

// func accum3x64Asm(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)
//
// o[r·64 + i] += p[r·ldp + t]·values[vis[t]·64 + i] for the 3 rows r, i < 64 and t = 0, 1, …, n-1 in
// order (every vis[t] checked by the caller).
TEXT ·accum3x64Asm(SB), NOSPLIT, $0-48
	MOVQ o+0(FP), DI
	MOVQ p+8(FP), R9
	MOVQ ldp+16(FP), R10
	MOVQ values+24(FP), BX
	MOVQ vis+32(FP), SI
	MOVQ n+40(FP), CX
	SHLQ $2, R10
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS 256(DI), Z4
	VMOVUPS 320(DI), Z5
	VMOVUPS 384(DI), Z6
	VMOVUPS 448(DI), Z7
	VMOVUPS 512(DI), Z8
	VMOVUPS 576(DI), Z9
	VMOVUPS 640(DI), Z10
	VMOVUPS 704(DI), Z11
	TESTQ CX, CX
	JEQ store

key:
	MOVLQSX (SI), R8
	SHLQ $8, R8
	VMOVUPS 0(BX)(R8*1), Z16
	VMOVUPS 64(BX)(R8*1), Z17
	VMOVUPS 128(BX)(R8*1), Z18
	VMOVUPS 192(BX)(R8*1), Z19
	VBROADCASTSS (R9), Z12
	VBROADCASTSS (R9)(R10*1), Z13
	VBROADCASTSS (R9)(R10*2), Z14
	VMULPS Z16, Z12, Z20
	VMULPS Z17, Z12, Z21
	VMULPS Z18, Z12, Z22
	VMULPS Z19, Z12, Z23
	VMULPS Z16, Z13, Z24
	VMULPS Z17, Z13, Z25
	VMULPS Z18, Z13, Z26
	VMULPS Z19, Z13, Z27
	VMULPS Z16, Z14, Z28
	VMULPS Z17, Z14, Z29
	VMULPS Z18, Z14, Z30
	VMULPS Z19, Z14, Z31
	VADDPS Z20, Z0, Z0
	VADDPS Z21, Z1, Z1
	VADDPS Z22, Z2, Z2
	VADDPS Z23, Z3, Z3
	VADDPS Z24, Z4, Z4
	VADDPS Z25, Z5, Z5
	VADDPS Z26, Z6, Z6
	VADDPS Z27, Z7, Z7
	VADDPS Z28, Z8, Z8
	VADDPS Z29, Z9, Z9
	VADDPS Z30, Z10, Z10
	VADDPS Z31, Z11, Z11
	ADDQ $4, SI
	ADDQ $4, R9
	DECQ CX
	JNE key

store:
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	VMOVUPS Z8, 512(DI)
	VMOVUPS Z9, 576(DI)
	VMOVUPS Z10, 640(DI)
	VMOVUPS Z11, 704(DI)
	VZEROUPPER
	RET

// func accum2x64Asm(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)
//
// o[r·64 + i] += p[r·ldp + t]·values[vis[t]·64 + i] for the 2 rows r, i < 64 and t = 0, 1, …, n-1 in
// order (every vis[t] checked by the caller).
TEXT ·accum2x64Asm(SB), NOSPLIT, $0-48
	MOVQ o+0(FP), DI
	MOVQ p+8(FP), R9
	MOVQ ldp+16(FP), R10
	MOVQ values+24(FP), BX
	MOVQ vis+32(FP), SI
	MOVQ n+40(FP), CX
	SHLQ $2, R10
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS 256(DI), Z4
	VMOVUPS 320(DI), Z5
	VMOVUPS 384(DI), Z6
	VMOVUPS 448(DI), Z7
	TESTQ CX, CX
	JEQ store

key:
	MOVLQSX (SI), R8
	SHLQ $8, R8
	VMOVUPS 0(BX)(R8*1), Z16
	VMOVUPS 64(BX)(R8*1), Z17
	VMOVUPS 128(BX)(R8*1), Z18
	VMOVUPS 192(BX)(R8*1), Z19
	VBROADCASTSS (R9), Z12
	VBROADCASTSS (R9)(R10*1), Z13
	VMULPS Z16, Z12, Z20
	VMULPS Z17, Z12, Z21
	VMULPS Z18, Z12, Z22
	VMULPS Z19, Z12, Z23
	VMULPS Z16, Z13, Z24
	VMULPS Z17, Z13, Z25
	VMULPS Z18, Z13, Z26
	VMULPS Z19, Z13, Z27
	VADDPS Z20, Z0, Z0
	VADDPS Z21, Z1, Z1
	VADDPS Z22, Z2, Z2
	VADDPS Z23, Z3, Z3
	VADDPS Z24, Z4, Z4
	VADDPS Z25, Z5, Z5
	VADDPS Z26, Z6, Z6
	VADDPS Z27, Z7, Z7
	ADDQ $4, SI
	ADDQ $4, R9
	DECQ CX
	JNE key

store:
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	VZEROUPPER
	RET

// func accum3x32Asm(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)
//
// o[r·32 + i] += p[r·ldp + t]·values[vis[t]·32 + i] for the 3 rows r, i < 32 and t = 0, 1, …, n-1 in
// order (every vis[t] checked by the caller).
TEXT ·accum3x32Asm(SB), NOSPLIT, $0-48
	MOVQ o+0(FP), DI
	MOVQ p+8(FP), R9
	MOVQ ldp+16(FP), R10
	MOVQ values+24(FP), BX
	MOVQ vis+32(FP), SI
	MOVQ n+40(FP), CX
	SHLQ $2, R10
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS 256(DI), Z4
	VMOVUPS 320(DI), Z5
	TESTQ CX, CX
	JEQ store

key:
	MOVLQSX (SI), R8
	SHLQ $7, R8
	VMOVUPS 0(BX)(R8*1), Z16
	VMOVUPS 64(BX)(R8*1), Z17
	VBROADCASTSS (R9), Z12
	VBROADCASTSS (R9)(R10*1), Z13
	VBROADCASTSS (R9)(R10*2), Z14
	VMULPS Z16, Z12, Z20
	VMULPS Z17, Z12, Z21
	VMULPS Z16, Z13, Z22
	VMULPS Z17, Z13, Z23
	VMULPS Z16, Z14, Z24
	VMULPS Z17, Z14, Z25
	VADDPS Z20, Z0, Z0
	VADDPS Z21, Z1, Z1
	VADDPS Z22, Z2, Z2
	VADDPS Z23, Z3, Z3
	VADDPS Z24, Z4, Z4
	VADDPS Z25, Z5, Z5
	ADDQ $4, SI
	ADDQ $4, R9
	DECQ CX
	JNE key

store:
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VZEROUPPER
	RET

// func accum2x32Asm(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)
//
// o[r·32 + i] += p[r·ldp + t]·values[vis[t]·32 + i] for the 2 rows r, i < 32 and t = 0, 1, …, n-1 in
// order (every vis[t] checked by the caller).
TEXT ·accum2x32Asm(SB), NOSPLIT, $0-48
	MOVQ o+0(FP), DI
	MOVQ p+8(FP), R9
	MOVQ ldp+16(FP), R10
	MOVQ values+24(FP), BX
	MOVQ vis+32(FP), SI
	MOVQ n+40(FP), CX
	SHLQ $2, R10
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	TESTQ CX, CX
	JEQ store

key:
	MOVLQSX (SI), R8
	SHLQ $7, R8
	VMOVUPS 0(BX)(R8*1), Z16
	VMOVUPS 64(BX)(R8*1), Z17
	VBROADCASTSS (R9), Z12
	VBROADCASTSS (R9)(R10*1), Z13
	VMULPS Z16, Z12, Z20
	VMULPS Z17, Z12, Z21
	VMULPS Z16, Z13, Z22
	VMULPS Z17, Z13, Z23
	VADDPS Z20, Z0, Z0
	VADDPS Z21, Z1, Z1
	VADDPS Z22, Z2, Z2
	VADDPS Z23, Z3, Z3
	ADDQ $4, SI
	ADDQ $4, R9
	DECQ CX
	JNE key

store:
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VZEROUPPER
	RET
