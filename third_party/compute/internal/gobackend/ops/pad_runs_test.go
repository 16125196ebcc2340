// Temper fork: see third_party/README.md.

package ops

import (
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestPadRuns: Pad against a plain reference, with the innermost padded axis copied as one run
// (start/end padding on the last axis, as a KV cache grows) and the per-element path (interior
// padding) alike.
func TestPadRuns(t *testing.T) {
	bk, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	backend := bk.(*gobackend.Backend)
	defer backend.Finalize()
	dims := []int{3, 4, 5}
	for _, cfg := range [][]compute.PadAxis{
		{{}, {}, {End: 3}},
		{{}, {}, {Start: 2, End: 1}},
		{{}, {End: 2}, {}},
		{{Start: 1, End: 1}, {}, {}},
		{{}, {Start: 1, End: 2}, {}},
		{{Start: 1}, {}, {End: 2}},
		{{}, {}, {Start: 1, Interior: 1}},
		{{}, {Interior: 2}, {End: 1}},
	} {
		in := make([]float32, 3*4*5)
		for i := range in {
			in[i] = float32(i + 1)
		}
		outDims := make([]int, 3)
		for a, c := range cfg {
			outDims[a] = dims[a] + c.Start + c.End + (dims[a]-1)*c.Interior
		}
		want := make([]float32, outDims[0]*outDims[1]*outDims[2])
		for i := range 3 {
			for j := range 4 {
				for k := range 5 {
					oi := cfg[0].Start + i*(1+cfg[0].Interior)
					oj := cfg[1].Start + j*(1+cfg[1].Interior)
					ok := cfg[2].Start + k*(1+cfg[2].Interior)
					want[(oi*outDims[1]+oj)*outDims[2]+ok] = in[(i*4+j)*5+k]
				}
			}
		}
		// A dirty pooled buffer of the output's size: every output element must be written.
		dirty, err := backend.GetBuffer(shapes.Make(dtypes.Float32, outDims...))
		if err != nil {
			t.Fatal(err)
		}
		for i := range dirty.Flat.([]float32) {
			dirty.Flat.([]float32)[i] = -7
		}
		backend.PutBuffer(dirty)
		node := &gobackend.Node{Shape: shapes.Make(dtypes.Float32, outDims...), Data: &padNode{axesConfig: cfg}}
		operand := &gobackend.Buffer{RawShape: shapes.Make(dtypes.Float32, dims...), Flat: in}
		fill := &gobackend.Buffer{RawShape: shapes.Make(dtypes.Float32), Flat: []float32{0}}
		out, err := execPad(backend, node, []*gobackend.Buffer{operand, fill}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := out.Flat.([]float32)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("pad %v: [%d] = %g, want %g", cfg, i, got[i], want[i])
			}
		}
	}
}
