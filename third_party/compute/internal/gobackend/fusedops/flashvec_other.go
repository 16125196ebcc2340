// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build !amd64 || !goexperiment.simd

package fusedops

func maxVector(x []float32, m *float32) int                                       { return 0 }
func sumVector(x []float32, lanes *[8]float32) int                                { return 0 }
func subScalarVector(x []float32, c float32) int                                  { return 0 }
func subVector(x, y []float32) int                                                { return 0 }
func addVector(x, y []float32) int                                                { return 0 }
func scaleAddVector(x []float32, a float32, y []float32) int                      { return 0 }
func divVector(x []float32, c float32) int                                        { return 0 }
func dScoresVector(p, dp []float32, c float32) int                                { return 0 }
func dScoresColsVector(p, dp, dl []float32) int                                   { return 0 }
func oneMinusSquareVector(g, t []float32) int                                     { return 0 }
func scaleMaxVector(x []float32, c float32, m *float32) int                       { return 0 }
func scaleVector(x []float32, c float32) int                                      { return 0 }
func dotVector(x, y []float32, lanes *[8]float32) int                             { return 0 }
func axpyVector(x []float32, a float32, y []float32) int                          { return 0 }
func rowScoresVector(sc, q, keys []float32, vis []int32) bool                     { return false }
func rowAccumulateVector(o, p, values []float32, vis []int32) bool                { return false }
func groupScoresVector(sc, q []float32, nr int, keys []float32, vis []int32) bool { return false }
func groupAccumulateVector(o, p []float32, nr int, values []float32, vis []int32) bool {
	return false
}

func ropeVector(dst, x, cos, sin []float32, half int) int { return 0 }

func decodeSoftmaxVector(sc []float32, nr, n int, scale float32, scaleMax bool, mx, sums *[decodeGroup]float32) bool {
	return false
}
func decodeDivVector(o []float32, nr int, sums *[decodeGroup]float32) bool { return false }
