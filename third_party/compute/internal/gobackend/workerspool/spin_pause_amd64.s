// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

#include "textflag.h"

// func pause(n uint32)
TEXT ·pause(SB), NOSPLIT, $0-4
	MOVL	n+0(FP), AX
again:
	PAUSE
	SUBL	$1, AX
	JNZ	again
	RET
