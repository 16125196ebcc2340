// Temper fork: see third_party/README.md.

package gobackend_test

import (
	"math"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestZerosClearsFloats: Zeros leaves +0 in every element of a float buffer that held other values
// (negative zero included), whatever its length.
func TestZerosClearsFloats(t *testing.T) {
	for _, n := range []int{1, 17, 4096 + 3} {
		buf, err := backend.(*gobackend.Backend).GetBuffer(shapes.Make(dtypes.Float32, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := buf.Fill(float32(math.Copysign(0, -1))); err != nil {
			t.Fatal(err)
		}
		buf.Zeros()
		for i, v := range buf.Flat.([]float32) {
			if math.Float32bits(v) != 0 {
				t.Fatalf("n=%d: [%d] = %g (bits %x) after Zeros", n, i, v, math.Float32bits(v))
			}
		}
	}
}
