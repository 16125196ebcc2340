// Temper fork: see third_party/README.md.

package gobackend_test

import (
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestOpProfile: with a profile running, the sequential executor counts every op it runs under a
// key naming the op and its shapes; stopping returns the stats once and ends the counting.
func TestOpProfile(t *testing.T) {
	be, err := gobackend.New("ops_sequential")
	if err != nil {
		t.Fatal(err)
	}
	b := be.(*gobackend.Backend)
	fn := b.Builder("op_profile").Main()
	cl, err := fn.Closure()
	if err != nil {
		t.Fatal(err)
	}
	x, _ := cl.Parameter("x", shapes.Make(dtypes.Float32, 2, 3), nil)
	y, _ := cl.Parameter("y", shapes.Make(dtypes.Float32, 2, 3), nil)
	sum, err := cl.Add(x, y)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cl.Transpose(sum, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Return([]compute.Value{tr}, nil); err != nil {
		t.Fatal(err)
	}
	cc := cl.(*gobackend.Function).Compiled
	run := func() {
		xb := makeBuffer(t, shapes.Make(dtypes.Float32, 2, 3), []float32{1, 2, 3, 4, 5, 6})
		yb := makeBuffer(t, shapes.Make(dtypes.Float32, 2, 3), []float32{1, 1, 1, 1, 1, 1})
		if _, err := cc.Execute(b, []*gobackend.Buffer{xb, yb}, nil, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	run() // not profiled
	gobackend.StartOpProfile()
	run()
	run()
	stats := gobackend.StopOpProfile()
	run() // not profiled either
	want := map[string]string{
		"Add":       "Add (Float32)[2, 3] (Float32)[2, 3] → (Float32)[2, 3]",
		"Transpose": "Transpose (Float32)[2, 3] → (Float32)[3, 2] [1 0]",
	}
	if len(stats) != len(want) {
		t.Fatalf("stats %+v: want one per op of %v", stats, want)
	}
	for _, s := range stats {
		if s.Key != want[s.Op] || s.Count != 2 || s.Wall <= 0 || s.CPU < 0 {
			t.Errorf("stat %+v: want key %q, count 2, wall > 0", s, want[s.Op])
		}
		if !strings.HasPrefix(s.Key, s.Op) {
			t.Errorf("key %q does not start with its op %q", s.Key, s.Op)
		}
	}
	if again := gobackend.StopOpProfile(); again != nil {
		t.Errorf("second stop: %+v, want nil", again)
	}
}
