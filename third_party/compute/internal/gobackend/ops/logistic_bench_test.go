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
