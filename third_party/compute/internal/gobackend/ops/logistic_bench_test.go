// Temper fork: see third_party/README.md.

package ops

import (
	"math"
	"testing"
)

// TestLogisticInPlace: the float32 logistic gives the same results written in place.
func TestLogisticInPlace(t *testing.T) {
	in := make([]float32, 1100)
	for i := range in {
		in[i] = float32(i-550) / 37
	}
	out := make([]float32, len(in))
	execLogisticFloat32(in, out)
	execLogisticFloat32(in, in)
	for i := range in {
		if in[i] != out[i] {
			t.Fatalf("in place [%d] = %g, out of place %g", i, in[i], out[i])
		}
		x := float64(i-550) / 37
		if want := 1 / (1 + math.Exp(-x)); math.Abs(float64(out[i])-want) > 2e-7 {
			t.Fatalf("logistic(%g) = %g, want %g", x, out[i], want)
		}
	}
}

func BenchmarkLogisticFloat32(b *testing.B) {
	in := make([]float32, 1<<16)
	for i := range in {
		in[i] = float32(i%200-100) / 25
	}
	out := make([]float32, len(in))
	for range b.N {
		execLogisticFloat32(in, out)
	}
}

// TestLogisticKernelsMatchScalar: the vector sign handling gives the scalar loops' bits, on
// random signs (the case the scalar branch mispredicted), ±0, ±Inf, NaN and ragged tails.
func TestLogisticKernelsMatchScalar(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 33, 512} {
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(math.Sin(float64(i)*12.9898)*43758.5453) / 1000
		}
		specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -90, 90}
		for i := 0; i < n && i < len(specials); i++ {
			in[n-1-i] = specials[i]
		}
		wantT, gotT := make([]float32, n), make([]float32, n)
		negAbs(in, wantT)
		negAbsKernel(in, gotT)
		e := make([]float32, n)
		for i, x := range in {
			e[i] = float32(math.Exp(float64(-abs32(x))))
		}
		want, got := make([]float32, n), make([]float32, n)
		logisticCombine(in, e, want)
		logisticCombineKernel(in, e, got)
		for i := range in {
			if math.Float32bits(wantT[i]) != math.Float32bits(gotT[i]) {
				t.Fatalf("n=%d negAbs(%g) = %g, scalar %g", n, in[i], gotT[i], wantT[i])
			}
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("n=%d combine(%g) = %g, scalar %g", n, in[i], got[i], want[i])
			}
		}
	}
}
