// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build !amd64 || !goexperiment.simd

package matmul

func stridedVector(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) bool {
	return false
}
