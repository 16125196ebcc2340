// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build !amd64 || !goexperiment.simd

package fastmath

func expSliceVector(dst, src []float32) int { return 0 }

func sumLanesVector(x []float32, lanes *[16]float32) int { return 0 }
func maxVector(x []float32, m *float32) int              { return 0 }
func subScalarVector(dst, src []float32, c float32) int  { return 0 }
func scaleVector(x []float32, c float32) int             { return 0 }
