// Temper fork: see third_party/README.md.

package ops

import (
	"math"
	"testing"
)

// TestExp32AndLogistic: the float32 kernels stay within a few ulp of float64 math and keep the
// edge semantics (±Inf, NaN, underflow to 0).
func TestExp32AndLogistic(t *testing.T) {
	for _, x := range []float32{-1e9, -104.5, -103, -100, -87.5, -87, -20, -1, -1e-3, 0, 1e-3, 0.5, 1, 10, 88, 88.5, 100,
		float32(math.Inf(1)), float32(math.Inf(-1))} {
		want := math.Exp(float64(x))
		got := expOne(x)
		if math.IsInf(want, 1) || want > math.MaxFloat32 {
			if !math.IsInf(float64(got), 1) {
				t.Errorf("exp(%g) = %g, want +Inf", x, got)
			}
			continue
		}
		if rel := math.Abs(float64(got)-want) / math.Max(want, 1e-38); rel > 3e-7 && want > 1e-37 {
			t.Errorf("exp(%g) = %g, want %g (rel %g)", x, got, want, rel)
		}
	}
	if got := expOne(float32(math.NaN())); !math.IsNaN(float64(got)) {
		t.Errorf("exp(NaN) = %g", got)
	}
	in := []float32{-100, -5, -0.5, 0, 0.5, 5, 100, float32(math.Inf(1)), float32(math.Inf(-1))}
	out := make([]float32, len(in))
	execLogisticFloat32(in, out)
	for i, x := range in {
		want := 1 / (1 + math.Exp(-float64(x)))
		if math.Abs(float64(out[i])-want) > 1e-7 {
			t.Errorf("logistic(%g) = %g, want %g", x, out[i], want)
		}
	}
}

// expOne runs the Exp op's kernel on one element.
func expOne(x float32) float32 {
	out := []float32{0}
	execExpFloat32([]float32{x}, out)
	return out[0]
}

// TestSqrtKernelMatchesScalar: the float32 square root kernel (vectorised where the ISA has it)
// gives the scalar float64 loop's bits on special values (±0, ±Inf, NaNs, negatives, subnormals,
// the largest and smallest normals) and on 2^22 random bit patterns, at every offset of a tail.
func TestSqrtKernelMatchesScalar(t *testing.T) {
	in := []float32{0, float32(math.Copysign(0, -1)), 1, 2, 4, -1, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc00123), 1e-45, 1e-40,
		math.SmallestNonzeroFloat32, math.MaxFloat32, 1.1754944e-38}
	bits := uint32(0x9e3779b9)
	for range 1 << 22 {
		bits = bits*1664525 + 1013904223
		in = append(in, math.Float32frombits(bits))
	}
	for _, off := range []int{0, 1, 7, 15} {
		x := in[off:]
		got, want := make([]float32, len(x)), make([]float32, len(x))
		execSqrtFloat32(x, got)
		execSqrtGeneric(x, want)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("sqrt(%g [%#x]) = %#x, want %#x", x[i], math.Float32bits(x[i]), math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
	}
	if sqrtKernel == nil {
		t.Fatal("no sqrt kernel")
	}
}
