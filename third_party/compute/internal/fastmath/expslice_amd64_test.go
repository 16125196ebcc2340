// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fastmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExp32SliceAVX2 reruns the slice test on the AVX2 path of an AVX-512 machine.
func TestExp32SliceAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	saved := hasAVX512
	hasAVX512 = false
	defer func() { hasAVX512 = saved }()
	TestExp32Slice(t)
}

// TestSoftmaxRow32ISAs: the AVX-512 and AVX2 loops give the same bits (the sum's order is fixed).
func TestSoftmaxRow32ISAs(t *testing.T) {
	if !hasAVX512 || !hasAVX2 {
		t.Skip("needs both AVX-512 and AVX2")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 1; n <= 130; n++ {
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(rng.NormFloat64() * 4)
		}
		a, b := make([]float32, n), make([]float32, n)
		SoftmaxRow32(in, a)
		hasAVX512 = false
		SoftmaxRow32(in, b)
		hasAVX512 = true
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("n=%d [%d]: AVX-512 %g, AVX2 %g", n, i, a[i], b[i])
			}
		}
	}
}

// TestSoftmaxRow32Scalar reruns the softmax test with the vector loops off (the scalar fallback).
func TestSoftmaxRow32Scalar(t *testing.T) {
	saved512, saved2 := hasAVX512, hasAVX2
	hasAVX512, hasAVX2 = false, false
	defer func() { hasAVX512, hasAVX2 = saved512, saved2 }()
	TestSoftmaxRow32(t)
}
