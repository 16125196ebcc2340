// Temper fork: see third_party/README.md.

package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// parallelBackends are backends with one, two and three workers.
func parallelBackends(t *testing.T) map[int]*gobackend.Backend {
	t.Helper()
	out := map[int]*gobackend.Backend{}
	for _, p := range []int{1, 2, 3} {
		be, err := gobackend.New(fmt.Sprintf("parallelism=%d", p))
		if err != nil {
			t.Fatal(err)
		}
		out[p] = be.(*gobackend.Backend)
	}
	return out
}

// TestParallelForCoversOnce: every index in exactly one range, range starts aligned.
func TestParallelForCoversOnce(t *testing.T) {
	for p, be := range parallelBackends(t) {
		for _, c := range []struct{ n, grain, align int }{{0, 1, 1}, {1, 1, 1}, {100, 1, 1}, {1000, 10, 16}, {1 << 18, 1 << 14, 16}, {12345, 7, 3}} {
			var mu sync.Mutex
			seen := make([]int, c.n)
			parallelFor(be, c.n, c.grain, c.align, func(lo, hi int) {
				if lo%c.align != 0 || lo >= hi {
					t.Errorf("p=%d %+v: range [%d, %d)", p, c, lo, hi)
				}
				mu.Lock()
				defer mu.Unlock()
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			for i, s := range seen {
				if s != 1 {
					t.Fatalf("p=%d %+v: index %d covered %d times", p, c, i, s)
				}
			}
		}
	}
}

func randomFloats(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()*4 - 2
	}
	return x
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

// TestParallelBinaryMatchesSequential: the split binary ops give the unsplit ops' bits for equal
// shapes, scalars and broadcasts along any axis, on one to three workers.
func TestParallelBinaryMatchesSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 1))
	f := func(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float32, dims...) }
	cases := []struct{ l, r shapes.Shape }{
		{f(256, 1024), f(256, 1024)},
		{f(256, 1024), f()},
		{f(), f(256, 1024)},
		{f(64, 128, 384), f(64, 128, 1)},
		{f(64, 128, 384), f(1, 1, 384)},
		{f(64, 1, 384), f(64, 128, 384)},
		{f(16, 6, 128, 128), f(16, 1, 128, 128)},
		{f(3, 50000), f(3, 1)},
		{f(1, 300000), f(1, 1)},
	}
	backends := parallelBackends(t)
	for _, c := range cases {
		o := c.l
		if c.l.Rank() < c.r.Rank() || (c.l.Rank() == c.r.Rank() && c.l.Size() < c.r.Size()) {
			o = c.r
		}
		if c.l.Rank() == c.r.Rank() {
			dims := make([]int, o.Rank())
			for i := range dims {
				dims[i] = max(c.l.Dim(i), c.r.Dim(i))
			}
			o = f(dims...)
		}
		lhs, rhs := randomFloats(rng, c.l.Size()), randomFloats(rng, c.r.Size())
		for _, o2 := range runsOps {
			op, l, r, ls, rs := o2.op, lhs, rhs, c.l, c.r
			if o2.commutative && len(l) == 1 { // as runsExecutor: a scalar goes right
				l, r, ls, rs = r, l, rs, ls
			}
			want := make([]float32, o.Size())
			runsBinary(op, l, r, want, ls, rs, o)
			for p, be := range backends {
				got := make([]float32, o.Size())
				parallelRunsBinary(be, op, l, r, got, ls, rs, o)
				sameBits(t, fmt.Sprintf("%s %s %s, %d workers", op, ls, rs, p), got, want)
			}
		}
	}
}

// TestParallelUnaryMatchesGeneric: the split unary executors give the op's own executor's bits.
func TestParallelUnaryMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 2))
	shape := shapes.Make(dtypes.Float32, 3, 70001)
	in := randomFloats(rng, shape.Size())
	in[5], in[77], in[90000] = float32(math.Inf(1)), float32(math.NaN()), -1e9
	for _, u := range parallelUnaryOps {
		node := &gobackend.Node{OpType: u.op, Shape: shape}
		run := func(be *gobackend.Backend, exec gobackend.NodeExecutor) []float32 {
			buf := &gobackend.Buffer{RawShape: shape, Flat: append([]float32(nil), in...), InUse: true}
			out, err := exec(be, node, []*gobackend.Buffer{buf}, []bool{false})
			if err != nil {
				t.Fatal(err)
			}
			return out.Flat.([]float32)
		}
		for p, be := range parallelBackends(t) {
			want := run(be, u.generic)
			got := run(be, parallelUnaryExecutor(u.kernel, u.generic))
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i]))) {
					t.Fatalf("%s, %d workers: [%d] = %g, want %g", u.op, p, i, got[i], want[i])
				}
			}
		}
	}
}

// TestParallelTransposeMatchesIterator: large transposes split across workers (runs and tiles,
// batched and not) against the reference iterator.
func TestParallelTransposeMatchesIterator(t *testing.T) {
	cases := []struct{ dims, perm []int }{
		{[]int{2048, 1024}, []int{1, 0}},
		{[]int{333, 517}, []int{1, 0}},
		{[]int{32, 384, 128}, []int{0, 2, 1}},
		{[]int{16, 128, 2, 3, 64}, []int{0, 2, 3, 1, 4}},
		{[]int{16, 2, 3, 128, 64}, []int{0, 3, 1, 2, 4}},
		{[]int{7, 9, 1100}, []int{2, 0, 1}},
	}
	backends := parallelBackends(t)
	for _, c := range cases {
		shape := shapes.Make(dtypes.Float32, c.dims...)
		n := shape.Size()
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(i)
		}
		want := make([]float32, n)
		it := NewTransposeIterator(shape, c.perm)
		for _, v := range in {
			want[it.Next()] = v
		}
		outDims := make([]int, len(c.perm))
		for i, a := range c.perm {
			outDims[i] = c.dims[a]
		}
		for p, be := range backends {
			got := make([]float32, n)
			operand := &gobackend.Buffer{RawShape: shape, Flat: in, RawBytes: float32Bytes(in)}
			output := &gobackend.Buffer{RawShape: shapes.Make(dtypes.Float32, outDims...), Flat: got, RawBytes: float32Bytes(got)}
			if !fastTransposeOn(be, operand, output, c.perm) {
				t.Fatal("fastTransposeOn refused float32")
			}
			sameBits(t, fmt.Sprintf("transpose %v %v, %d workers", c.dims, c.perm, p), got, want)
		}
	}
}

// TestParallelReduceMatchesSequential: large float32 reductions split by their kept leading axes
// give the unsplit reductions' bits (each output summed in the same order).
func TestParallelReduceMatchesSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 3))
	cases := []struct {
		dims, axes []int
	}{
		{[]int{16, 128, 384}, []int{2}},
		{[]int{16, 128, 384}, []int{0, 1}},
		{[]int{16, 6, 128, 128}, []int{3}},
		{[]int{64, 50, 40}, []int{1}},
		{[]int{300, 400}, []int{0}},
		{[]int{2, 100000}, []int{1}},
	}
	for _, c := range cases {
		shape := shapes.Make(dtypes.Float32, c.dims...)
		in := randomFloats(rng, shape.Size())
		outDims := []int{}
		mask := reducedMask(len(c.dims), c.axes)
		for a, d := range c.dims {
			if !mask[a] {
				outDims = append(outDims, d)
			}
		}
		outShape := shapes.Make(dtypes.Float32, outDims...)
		operand := &gobackend.Buffer{RawShape: shape, Flat: in}
		for _, op := range []compute.OpType{compute.OpTypeReduceSum, compute.OpTypeReduceMax, compute.OpTypeReduceMin} {
			want := make([]float32, outShape.Size())
			fastReduceFloat32(op, operand, &gobackend.Buffer{RawShape: outShape, Flat: want}, c.axes)
			for p, be := range parallelBackends(t) {
				got := make([]float32, outShape.Size())
				fastReduceFloat32On(be, op, operand, &gobackend.Buffer{RawShape: outShape, Flat: got}, c.axes)
				sameBits(t, fmt.Sprintf("%s %v over %v, %d workers", op, c.dims, c.axes, p), got, want)
			}
		}
	}
}
