// Temper fork: see third_party/README.md.

package fusedops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestFusedSoftmaxParallelMatchesRows: a large last-axis float32 softmax split across one to three
// workers gives the row kernel's bits.
func TestFusedSoftmaxParallelMatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 5))
	for _, dims := range [][]int{{16, 6, 128, 128}, {1000, 77}, {3, 70000}} {
		shape := shapes.Make(dtypes.Float32, dims...)
		in := make([]float32, shape.Size())
		for i := range in {
			in[i] = rng.Float32()*20 - 10
			if i%97 == 0 {
				in[i] = -1e9 // a masked score
			}
		}
		n := dims[len(dims)-1]
		want := make([]float32, len(in))
		softmaxLastAxisFloat32(in, want, len(in)/n, n)
		for _, p := range []int{1, 2, 3} {
			be, err := gobackend.New(fmt.Sprintf("parallelism=%d", p))
			if err != nil {
				t.Fatal(err)
			}
			node := &gobackend.Node{Shape: shape, Data: &nodeFusedSoftmax{axis: len(dims) - 1}}
			out, err := execFusedSoftmax(be.(*gobackend.Backend), node, []*gobackend.Buffer{{RawShape: shape, Flat: in}}, []bool{false})
			if err != nil {
				t.Fatal(err)
			}
			got := out.Flat.([]float32)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v, %d workers: [%d] = %g, want %g", dims, p, i, got[i], want[i])
				}
			}
		}
	}
}
