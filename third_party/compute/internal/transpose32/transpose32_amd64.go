// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package transpose32

import "unsafe"

// Block8x8AVX2 transposes one 8×8 block in AVX2 registers (transpose32_amd64.s): dst row r (8
// elements at dst + r·dstStride) = element r of source rows 0…7 (8 elements each at src +
// c·srcStride); strides in bytes. Eight row loads, 24 register shuffles and eight row stores. The
// caller checks bounds and that the CPU has AVX2.
//
//go:noescape
func Block8x8AVX2(src unsafe.Pointer, srcStride uintptr, dst unsafe.Pointer, dstStride uintptr)
