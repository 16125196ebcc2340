// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fastmath

import "math"

// SoftmaxRow32 writes softmax(in) to out (same length): e^(x−max) / Σ e^(x−max), with Exp32Slice's
// exponential. The maximum, the subtraction and the final scaling are exact, so vector loops give
// the scalar loop's bits; the sum is taken in one fixed order on every ISA (sum16), so the result
// does not depend on the machine's vector width either.
func SoftmaxRow32(in, out []float32) {
	n := len(in)
	if n == 0 {
		return
	}
	out = out[:n]
	m := max32(in)
	subScalar32(out, in, m)
	Exp32Slice(out, out)
	scale32(out, 1/sum16(out))
}

// sum16 adds x in a fixed order: sixteen running lanes over the whole blocks of 16 (lane j adds
// elements j, j+16, j+32…), then the lanes 0…15 in order, then the remaining elements in order. A
// vector loop of 16 float32 lanes (or two of 8) computes exactly this; rows shorter than 16 are summed
// left to right, as a plain loop would.
func sum16(x []float32) float32 {
	var lanes [16]float32
	i := sumLanesVector(x, &lanes)
	for ; i+16 <= len(x); i += 16 {
		for j := range 16 {
			lanes[j] += x[i+j]
		}
	}
	var s float32
	for _, v := range lanes {
		s += v
	}
	for ; i < len(x); i++ {
		s += x[i]
	}
	return s
}

// max32 is the largest element of x (NaN elements are skipped as by `if v > m`; a row with a NaN
// gives NaN outputs either way). x is not empty.
func max32(x []float32) float32 {
	m := float32(math.Inf(-1))
	i := maxVector(x, &m)
	for ; i < len(x); i++ {
		if x[i] > m {
			m = x[i]
		}
	}
	return m
}

// subScalar32 sets dst[i] = src[i] − c.
func subScalar32(dst, src []float32, c float32) {
	i := subScalarVector(dst, src, c)
	for ; i < len(src); i++ {
		dst[i] = src[i] - c
	}
}

// scale32 sets x[i] *= c.
func scale32(x []float32, c float32) {
	i := scaleVector(x, c)
	for ; i < len(x); i++ {
		x[i] *= c
	}
}
