// Temper fork: see third_party/README.md.

package fastmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExp32Slice: every element equals the scalar Exp32Exact bit for bit, whatever its position
// (vector lane or tail) and neighbours (edge values force the element-wise path), within 2e-7 of
// float64 exp in range, with the edge semantics of math.Exp outside it.
func TestExp32Slice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	edges := []float32{-1e9, -104.5, -100, -90, 88.5, 100, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for trial := range 200 {
		n := rng.IntN(70)
		src := make([]float32, n)
		for i := range src {
			src[i] = rng.Float32()*170 - 86
			if rng.IntN(10) == 0 {
				src[i] = edges[rng.IntN(len(edges))]
			}
		}
		dst := make([]float32, n)
		Exp32Slice(dst, src)
		for i, x := range src {
			want := Exp32Exact(x)
			if math.Float32bits(dst[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(dst[i]))) {
				t.Fatalf("trial %d: exp(%g) at %d = %g, scalar %g", trial, x, i, dst[i], want)
			}
			ref := math.Exp(float64(x))
			switch {
			case math.IsNaN(float64(x)):
				if !math.IsNaN(float64(want)) {
					t.Fatalf("exp(NaN) = %g", want)
				}
			case ref > math.MaxFloat32:
				if !math.IsInf(float64(want), 1) {
					t.Fatalf("exp(%g) = %g, want +Inf", x, want)
				}
			case ref > 1e-37:
				if rel := math.Abs(float64(want)-ref) / ref; rel > 2e-7 {
					t.Fatalf("exp(%g) = %g, want %g (rel %g)", x, want, ref, rel)
				}
			case x < -104:
				if want != 0 {
					t.Fatalf("exp(%g) = %g, want 0", x, want)
				}
			}
		}
		// In place.
		cp := append([]float32(nil), src...)
		Exp32Slice(cp, cp)
		for i := range cp {
			if math.Float32bits(cp[i]) != math.Float32bits(dst[i]) && !math.IsNaN(float64(cp[i])) {
				t.Fatalf("in place differs at %d", i)
			}
		}
	}
}
