// Temper fork: see third_party/README.md.

package ops

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

func randomDims(rng *rand.Rand) []int {
	rank := 1 + rng.IntN(5)
	dims := make([]int, rank)
	for i := range dims {
		dims[i] = 1 + rng.IntN(6)
	}
	return dims
}

// TestReduceRunsBitIdentical: the run-based sum/max/min equal the reference iterator's results
// bit for bit (same accumulation order).
func TestReduceRunsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 400 {
		dims := randomDims(rng)
		var axes []int
		for a := range dims {
			if rng.IntN(2) == 0 {
				axes = append(axes, a)
			}
		}
		if len(axes) == 0 {
			axes = []int{rng.IntN(len(dims))}
		}
		shape := shapes.Make(dtypes.Float32, dims...)
		in := make([]float32, shape.Size())
		for i := range in {
			in[i] = rng.Float32()*2 - 1
		}
		var outDims []int
		mask := reducedMask(len(dims), axes)
		for a, d := range dims {
			if !mask[a] {
				outDims = append(outDims, d)
			}
		}
		outShape := shapes.Make(dtypes.Float32, outDims...)
		operand := &gobackend.Buffer{RawShape: shape, Flat: in}
		for _, op := range []struct {
			name string
			fast func([]float32, []float32, []int, []bool)
			ref  func(operand, output *gobackend.Buffer, it *ReduceOutputIterator, dtype dtypes.DType) error
			init float32
		}{
			{"sum", reduceSumRuns[float32], execReduceSumGeneric[float32], 0},
			{"max", reduceMaxRuns[float32], execReduceMaxGeneric[float32], dtypes.Float32.LowestValue().(float32)},
			{"min", reduceMinRuns[float32], execReduceMinGeneric[float32], dtypes.Float32.HighestValue().(float32)},
		} {
			got := make([]float32, outShape.Size())
			for i := range got {
				got[i] = op.init
			}
			op.fast(in, got, dims, mask)
			want := make([]float32, outShape.Size())
			if err := op.ref(operand, &gobackend.Buffer{RawShape: outShape, Flat: want}, NewReduceOutputIterator(dims, axes), dtypes.Float32); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("trial %d %s dims %v axes %v: out[%d]=%v want %v", trial, op.name, dims, axes, i, got[i], want[i])
				}
			}
		}
	}
}

// TestFastSliceMatchesGeneric compares unit-stride slices with the reference implementation.
func TestFastSliceMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 400 {
		dims := randomDims(rng)
		starts := make([]int, len(dims))
		limits := make([]int, len(dims))
		strides := make([]int, len(dims))
		outDims := make([]int, len(dims))
		for a, d := range dims {
			starts[a] = rng.IntN(d)
			limits[a] = starts[a] + 1 + rng.IntN(d-starts[a])
			if rng.IntN(2) == 0 {
				starts[a], limits[a] = 0, d
			}
			strides[a] = 1
			outDims[a] = limits[a] - starts[a]
		}
		shape := shapes.Make(dtypes.Float32, dims...)
		in := make([]float32, shape.Size())
		for i := range in {
			in[i] = float32(i)
		}
		outShape := shapes.Make(dtypes.Float32, outDims...)
		got := make([]float32, outShape.Size())
		want := make([]float32, outShape.Size())
		operand := &gobackend.Buffer{RawShape: shape, Flat: in, RawBytes: float32Bytes(in)}
		if !fastSlice(operand, &gobackend.Buffer{RawShape: outShape, Flat: got, RawBytes: float32Bytes(got)}, starts, strides) {
			t.Fatal("fastSlice refused a unit-stride slice")
		}
		execSliceGeneric[float32](operand, &gobackend.Buffer{RawShape: outShape, Flat: want}, &sliceNode{starts: starts, limits: limits, strides: strides})
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("trial %d dims %v starts %v limits %v: out[%d]=%v want %v", trial, dims, starts, limits, i, got[i], want[i])
			}
		}
	}
}
