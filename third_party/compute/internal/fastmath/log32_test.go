// Temper fork: see third_party/README.md.

package fastmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLog32: Log32 is float32(math.Log(float64(x))) bit for bit for every float32 of [1, 2^25)
// (its table path, all 2^23·25 of them) and for random float32 bit patterns elsewhere (math.Log).
func TestLog32(t *testing.T) {
	fallbacks := 0
	for b := uint32(0x3f800000); b < 0x3f800000+25<<23; b++ {
		x := math.Float32frombits(b)
		want := float32(math.Log(float64(x)))
		if got := Log32(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("Log32(%g) = %g (%#x), want %g (%#x)", x, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		if b&0xffff == 0 { // count a sample of the fallbacks
			e, i := int32(b>>23)-127, (b>>16)&127
			m := float64(math.Float32frombits(b&0x7fffff | 0x3f800000))
			r := m*log32Tab[i].invc - 1
			p := r - r*r*(0.5-r*(1.0/3-r*(0.25-r*(0.2-r*(1.0/6-r*(1.0/7))))))
			y := (float64(e)*math.Ln2 + log32Tab[i].logc) + p
			if d := int64(math.Float64bits(y)&(1<<29-1)) - 1<<28; d < 1<<15 && d > -(1<<15) {
				fallbacks++
			}
		}
	}
	t.Logf("fallbacks in the sample: %d of %d", fallbacks, 25<<7)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1 << 20 {
		x := math.Float32frombits(rng.Uint32())
		want, got := float32(math.Log(float64(x))), Log32(x)
		if math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Fatalf("Log32(%g) = %g, want %g", x, got, want)
		}
	}
	for _, x := range []float32{0, float32(math.Copysign(0, -1)), -1, 1, 2, 1 << 25, float32(math.Inf(1)), float32(math.Inf(-1)), math.SmallestNonzeroFloat32, math.MaxFloat32} {
		want, got := float32(math.Log(float64(x))), Log32(x)
		if math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Fatalf("Log32(%g) = %g, want %g", x, got, want)
		}
	}
}

func BenchmarkLog32(b *testing.B) {
	xs := make([]float32, 256)
	for i := range xs {
		xs[i] = 1 + float32(i)*0.37
	}
	var s float32
	b.Run("Log32", func(b *testing.B) {
		for i := range b.N {
			s += Log32(xs[i&255])
		}
	})
	b.Run("math.Log", func(b *testing.B) {
		for i := range b.N {
			s += float32(math.Log(float64(xs[i&255])))
		}
	})
	_ = s
}
