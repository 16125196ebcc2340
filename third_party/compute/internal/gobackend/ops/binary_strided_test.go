// Temper fork: see third_party/README.md.

package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestStridedBinaryMatchesIterator checks the run-based broadcasting against the reference
// iterator for every kernel set on random same-rank shapes with size-1 broadcast axes.
func TestStridedBinaryMatchesIterator(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	kernels := map[string]struct {
		k  binaryKernels[float32]
		op func(a, b float32) float32
	}{
		"add": {addKernels[float32](), func(a, b float32) float32 { return a + b }},
		"sub": {subKernels[float32](), func(a, b float32) float32 { return a - b }},
		"mul": {mulKernels[float32](), func(a, b float32) float32 { return a * b }},
		"div": {divKernels[float32](), func(a, b float32) float32 { return a / b }},
		"max": {maxKernels[float32](), func(a, b float32) float32 { return max(a, b) }},
		"min": {minKernels[float32](), func(a, b float32) float32 { return min(a, b) }},
	}
	for op, name := range []string{"simd-add", "simd-sub", "simd-mul", "simd-div"} {
		if k := f32Kernels[op]; k.vv != nil {
			kernels[name] = struct {
				k  binaryKernels[float32]
				op func(a, b float32) float32
			}{k, kernels[name[5:]].op}
		}
	}
	for trial := range 400 {
		rank := 1 + rng.IntN(5)
		out := make([]int, rank)
		l := make([]int, rank)
		r := make([]int, rank)
		for i := range out {
			out[i] = 1 + rng.IntN(6)
			if i == rank-1 && rng.IntN(2) == 0 {
				out[i] = 17 + rng.IntN(40) // long enough for whole vectors
			}
			l[i], r[i] = out[i], out[i]
			switch rng.IntN(4) {
			case 0:
				l[i] = 1
			case 1:
				r[i] = 1
			}
		}
		ls, rs, os := shapes.Make(dtypes.Float32, l...), shapes.Make(dtypes.Float32, r...), shapes.Make(dtypes.Float32, out...)
		a := make([]float32, ls.Size())
		b := make([]float32, rs.Size())
		for i := range a {
			a[i] = float32(rng.IntN(19) - 9)
		}
		for i := range b {
			b[i] = float32(rng.IntN(19)-9) + 0.5
		}
		for name, kk := range kernels {
			got := make([]float32, os.Size())
			if !stridedBinary(a, b, got, ls, rs, os, kk.k) {
				// Only a run broadcast on both sides may be refused.
				continue
			}
			it := gobackend.NewZippedBroadcastIterator(ls, rs, os)
			for ix := range it.IterFlatIndices() {
				if want := kk.op(a[ix.LHSFlatIdx], b[ix.RHSFlatIdx]); got[ix.TgtFlatIdx] != want {
					t.Fatalf("trial %d %s %v %v→%v: out[%d]=%v want %v", trial, name, l, r, out, ix.TgtFlatIdx, got[ix.TgtFlatIdx], want)
				}
			}
		}
	}
}
