// Temper fork: see third_party/README.md.

package gobackend

import (
	"slices"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// TestScheduleCreationOrderWithBarrier: a function with a SchedulingBarrier (GoMLX's remat) runs in
// creation order; the same function without it keeps the dependency order, which here differs
// (a node with a short path to the output, created first, is run after a longer path).
func TestScheduleCreationOrderWithBarrier(t *testing.T) {
	be, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Finalize()
	for _, barrier := range []bool{false, true} {
		f := be.Builder("schedule").Main().(*Function)
		s := shapes.Make(dtypes.Float32, 4)
		pv, err := f.Parameter("p", s, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := pv.(*Node)
		short := f.NewNode(compute.OpTypeAbs, s, p) // → output directly
		x := f.NewNode(compute.OpTypeNeg, s, p)     // → y → output
		y := f.NewNode(compute.OpTypeNeg, s, x)
		if barrier {
			y = f.NewNode(compute.OpTypeSchedulingBarrier, s, y, short)
		}
		out := f.NewNode(compute.OpTypeAdd, s, y, short)
		if err := f.Return([]compute.Value{out}, nil); err != nil {
			t.Fatal(err)
		}
		fe, err := newFunctionExecutable(f)
		if err != nil {
			t.Fatal(err)
		}
		creation := make([]int, fe.NumNodesToProcess)
		for i := range creation {
			creation[i] = i
		}
		if got := slices.Equal(fe.Schedule, creation); got != barrier {
			t.Errorf("barrier=%v: schedule %v, creation order %v", barrier, fe.Schedule, creation)
		}
	}
}
