// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// func prefetchT0(p unsafe.Pointer, n uintptr)
//
// PREFETCHT0 of every 64-byte line of [p, p+n) (n > 0).
TEXT ·prefetchT0(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	LEAQ (SI)(CX*1), DX
t0loop:
	PREFETCHT0 (SI)
	ADDQ $64, SI
	CMPQ SI, DX
	JB t0loop
	RET
