// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build !amd64 || !goexperiment.simd

package simdstate

// ClearUpper is a no-op without SIMD kernels.
func ClearUpper() {}
