// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fastmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// softmaxReference is the plain loop SoftmaxRow32 replaced, with the sum in sum16's documented
// order spelled out element by element.
func softmaxReference(in []float32) []float32 {
	n := len(in)
	out := make([]float32, n)
	m := float32(math.Inf(-1))
	for _, v := range in {
		if v > m {
			m = v
		}
	}
	for i, v := range in {
		out[i] = Exp32Exact(v - m)
	}
	var lanes [16]float32
	whole := n - n%16
	for i := 0; i < whole; i++ {
		lanes[i%16] += out[i]
	}
	var s float32
	for _, v := range lanes {
		s += v
	}
	for i := whole; i < n; i++ {
		s += out[i]
	}
	inv := 1 / s
	for i := range out {
		out[i] *= inv
	}
	return out
}

// TestSoftmaxRow32: the vector loops give the reference's bits for every length from 0 to 130 (all
// remainders of 8 and 16), with masked scores (-1e9) in the rows, and stay within float32 rounding
// of a float64 softmax.
func TestSoftmaxRow32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 130; n++ {
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(rng.NormFloat64() * 3)
			if rng.IntN(5) == 0 {
				in[i] = -1e9
			}
		}
		got := make([]float32, n)
		SoftmaxRow32(in, got)
		want := softmaxReference(in)
		var z float64
		mx := math.Inf(-1)
		for _, v := range in {
			mx = math.Max(mx, float64(v))
		}
		for _, v := range in {
			z += math.Exp(float64(v) - mx)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d [%d] = %g, reference %g", n, i, got[i], want[i])
			}
			if p := math.Exp(float64(in[i])-mx) / z; math.Abs(float64(got[i])-p) > 1e-6 {
				t.Fatalf("n=%d [%d] = %g, float64 softmax %g", n, i, got[i], p)
			}
		}
	}
}

// TestSoftmaxRow32Uniform: a hand-computed case, four equal scores and one masked.
func TestSoftmaxRow32Uniform(t *testing.T) {
	in := []float32{2, 2, 2, 2, -1e9}
	out := make([]float32, len(in))
	SoftmaxRow32(in, out)
	for i, want := range []float32{0.25, 0.25, 0.25, 0.25, 0} {
		if out[i] != want {
			t.Fatalf("[%d] = %g, want %g", i, out[i], want)
		}
	}
}
