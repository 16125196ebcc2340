// Temper fork: see third_party/README.md.

package ops

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestFastTransposeMatchesIterator compares the fast kernel with the reference iterator on random
// shapes (size-1 axes, mergeable runs, tiles with ragged edges) and permutations.
func TestFastTransposeMatchesIterator(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		rank := 1 + rng.IntN(5)
		dims := make([]int, rank)
		for i := range dims {
			dims[i] = 1 + rng.IntN(7)
			if rng.IntN(4) == 0 {
				dims[i] = 1
			}
			if rng.IntN(6) == 0 {
				dims[i] = 33 + rng.IntN(40)
			}
		}
		perm := rng.Perm(rank)
		shape := shapes.Make(dtypes.Float32, dims...)
		n := shape.Size()
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(i)
		}
		operand := &gobackend.Buffer{RawShape: shape, Flat: in}
		operand.RawBytes = float32Bytes(in)
		outDims := make([]int, rank)
		for i, a := range perm {
			outDims[i] = dims[a]
		}
		got := make([]float32, n)
		output := &gobackend.Buffer{RawShape: shapes.Make(dtypes.Float32, outDims...), Flat: got, RawBytes: float32Bytes(got)}
		if !fastTranspose(operand, output, perm) {
			t.Fatalf("fastTranspose refused float32")
		}
		want := make([]float32, n)
		it := NewTransposeIterator(shape, perm)
		for _, v := range in {
			want[it.Next()] = v
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("trial %d dims %v perm %v: out[%d]=%v want %v", trial, dims, perm, i, got[i], want[i])
			}
		}
	}
}

func float32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}
