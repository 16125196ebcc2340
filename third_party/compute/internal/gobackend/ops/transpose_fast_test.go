// Temper fork: see third_party/README.md.

package ops

import (
	"fmt"
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

// TestTransposeBlockKernel: the 8×8 block kernel (where the CPU has one) against the scalar path on
// shapes with full 16×16 blocks and ragged edges, at power-of-two and odd strides.
func TestTransposeBlockKernel(t *testing.T) {
	if block8x8x32 == nil {
		t.Skip("no 8×8 block kernel on this CPU or build")
	}
	for _, tc := range []struct{ dims, perm []int }{
		{[]int{16, 16}, []int{1, 0}}, {[]int{2560, 384}, []int{1, 0}}, {[]int{37, 53}, []int{1, 0}},
		{[]int{3, 40, 24}, []int{0, 2, 1}}, {[]int{4, 33, 2, 48}, []int{3, 0, 2, 1}}, {[]int{64, 5, 32}, []int{2, 1, 0}},
	} {
		n := 1
		for _, d := range tc.dims {
			n *= d
		}
		in := make([]uint32, n)
		for i := range in {
			in[i] = uint32(i*2654435761 + 7)
		}
		plan := planTranspose(tc.dims, tc.perm)
		got, want := make([]uint32, n), make([]uint32, n)
		transposeTyped(in, got, plan, block8x8x32)
		transposeTyped(in, want, plan, nil)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("dims %v perm %v: out[%d]=%d want %d", tc.dims, tc.perm, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkTranspose2D: the training step's largest transposes (activations [tokens, features]).
//
//	cd third_party/compute && GOEXPERIMENT=simd go test ./internal/gobackend/ops/ -run '^$' -bench Transpose2D
func BenchmarkTranspose2D(b *testing.B) {
	for _, dims := range [][]int{{2560, 384}, {2560, 128}, {32, 320, 160}} {
		n := 1
		for _, d := range dims {
			n *= d
		}
		perm := []int{1, 0}
		if len(dims) == 3 {
			perm = []int{0, 2, 1}
		}
		in, out := make([]uint32, n), make([]uint32, n)
		plan := planTranspose(dims, perm)
		for _, k := range []struct {
			name string
			kern func(unsafe.Pointer, uintptr, unsafe.Pointer, uintptr)
		}{{"scalar", nil}, {"block", block8x8x32}} {
			if k.name == "block" && k.kern == nil {
				continue
			}
			b.Run(fmt.Sprint(dims, "/", k.name), func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				for range b.N {
					transposeTyped(in, out, plan, k.kern)
				}
			})
		}
	}
}
