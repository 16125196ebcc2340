// Temper fork: see third_party/README.md.

package ops

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestScatterRunsMatchesGeneric: the contiguous-run scatter gives the generic loop's bits on the
// KV-cache shapes (one element, one row per point), a partial outer window, repeated indices, and
// every combine; and it declines shapes it does not cover and out-of-range indices.
func TestScatterRunsMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	type tc struct {
		name                   string
		operand, ind, upd      []int
		window, inserted, map_ []int
		indices                []int32
		wantFast               bool
	}
	cases := []tc{
		{"k column", []int{4, 3, 8}, []int{4, 3, 3}, []int{4, 3}, nil, []int{0, 1, 2}, []int{0, 1, 2}, nil, true},
		{"v row", []int{4, 8, 3}, []int{4, 2}, []int{4, 3}, []int{1}, []int{0, 1}, []int{0, 1}, nil, true},
		{"partial outer window", []int{5, 6, 3}, []int{2, 2}, []int{2, 2, 3}, []int{1, 2}, []int{0}, []int{0, 1}, []int32{1, 2, 3, 4}, true},
		{"repeated", []int{3, 4}, []int{5, 2}, []int{5}, nil, []int{0, 1}, []int{0, 1}, []int32{1, 1, 1, 1, 2, 3, 1, 1, 0, 0}, true},
		{"out of range", []int{3, 4}, []int{2, 2}, []int{2}, nil, []int{0, 1}, []int{0, 1}, []int32{1, 1, 3, 0}, false},
		{"k column out of range", []int{2, 3, 4}, []int{2, 3}, []int{2}, nil, []int{0, 1, 2}, []int{0, 1, 2}, []int32{1, 2, 3, 1, 2, 4}, false},
		{"k column negative", []int{2, 3, 4}, []int{2, 3}, []int{2}, nil, []int{0, 1, 2}, []int{0, 1, 2}, []int32{1, 2, 3, 1, -1, 0}, false},
		{"k column explicit", []int{2, 3, 4}, []int{2, 3}, []int{2}, nil, []int{0, 1, 2}, []int{0, 1, 2}, []int32{1, 2, 3, 0, 0, 0}, true},
		{"window not trailing", []int{4, 3}, []int{2, 1}, []int{3, 2}, []int{0}, []int{0}, []int{0}, []int32{1, 2}, false},
	}
	for _, c := range cases {
		for _, op := range []compute.OpType{compute.OpTypeScatterSum, compute.OpTypeScatterMax, compute.OpTypeScatterMin} {
			oShape := shapes.Make(dtypes.Float32, c.operand...)
			iShape := shapes.Make(dtypes.Int32, c.ind...)
			uShape := shapes.Make(dtypes.Float32, c.upd...)
			idx := c.indices
			if idx == nil { // KV style: point p writes row p at slot 5 (or column 5)
				idx = make([]int32, iShape.Size())
				vec := c.ind[len(c.ind)-1]
				for p := range iShape.Size() / vec {
					for v := range vec {
						switch {
						case v == vec-1:
							idx[p*vec+v] = 5
						case vec == 3 && v == 1:
							idx[p*vec+v] = int32(p % c.operand[1])
						default:
							idx[p*vec+v] = int32(p / max(1, iShape.Size()/vec/c.operand[0]))
						}
					}
				}
			}
			base := make([]float32, oShape.Size())
			for i := range base {
				base[i] = rng.Float32()*2 - 1
			}
			updates := make([]float32, uShape.Size())
			for i := range updates {
				updates[i] = rng.Float32()*2 - 1
			}
			p := &scatterNode{indexVectorAxis: len(c.ind) - 1, updateWindowAxes: c.window,
				insertedWindowAxes: c.inserted, scatterAxesToOperandAxes: c.map_}
			ind := &gobackend.Buffer{RawShape: iShape, Flat: idx}
			upd := &gobackend.Buffer{RawShape: uShape, Flat: updates}
			fast := &gobackend.Buffer{RawShape: oShape, Flat: slices.Clone(base)}
			ok := scatterRunsFloat32(op, fast, ind, upd, p)
			if ok != c.wantFast {
				t.Fatalf("%s %s: fast path taken = %v, want %v", c.name, op, ok, c.wantFast)
			}
			if !ok {
				if !slices.Equal(fast.Flat.([]float32), base) {
					t.Fatalf("%s %s: declined but wrote", c.name, op)
				}
				continue
			}
			want := &gobackend.Buffer{RawShape: oShape, Flat: slices.Clone(base)}
			if err := execScatterGeneric[float32](op, want, ind, upd, p); err != nil {
				t.Fatal(err)
			}
			g, w := fast.Flat.([]float32), want.Flat.([]float32)
			for i := range g {
				if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
					t.Fatalf("%s %s: [%d] = %g, generic %g", c.name, op, i, g[i], w[i])
				}
			}
		}
	}
}
