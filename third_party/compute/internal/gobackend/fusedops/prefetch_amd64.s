// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64

#include "textflag.h"

// func prefetchRange(p unsafe.Pointer, n uintptr)
//
// PREFETCHT0 of every 64-byte line that holds a byte of [p, p+n): a hint only (no load result, no
// fault), so it changes no bits.
TEXT ·prefetchRange(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JEQ done
	ADDQ AX, CX      // end
	ANDQ $~63, AX    // the first line
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JB loop
done:
	RET
