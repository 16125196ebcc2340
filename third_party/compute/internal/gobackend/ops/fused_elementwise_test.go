// Temper fork: see third_party/README.md.

package ops

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// fusedCase builds a graph from parameters x, y, z (float32, shape), s (float32 scalar), b
// (bool, shape) and ok (bool scalar), and wants at least fused trees.
type fusedCase struct {
	name  string
	fused int
	build func(fn compute.Function, x, y, z, s, b, ok compute.Value) []compute.Value
}

// TestFusedElementwiseMatchesUnfused: graphs of elementwise ops give the same bits with the
// fusion pass as without it (the optimizer's update, activations, every unary kernel, scalar
// operands on either side of non-commutative ops, Where with vector and scalar conditions), for
// sizes that are and are not multiples of the chunk, split or not across one to three workers,
// with inputs donated (the fused node may write into one) or not; and the trees are fused.
func TestFusedElementwiseMatchesUnfused(t *testing.T) {
	cases := fusedCases(func(v compute.Value, err error) compute.Value {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	})
	rng := rand.New(rand.NewPCG(39, 7))
	backends := parallelBackends(t)
	for _, dims := range [][]int{{3*fusedChunk + 17}, {64, 1100}, {fusedMinElements}} {
		shape := shapes.Make(dtypes.Float32, dims...)
		n := shape.Size()
		x, y, z := randomFloats(rng, n), randomFloats(rng, n), randomFloats(rng, n)
		bs := make([]bool, n)
		for i := range bs {
			bs[i] = rng.IntN(2) == 0
		}
		for _, c := range cases {
			for _, okv := range []bool{true, false} {
				in := []any{x, y, z, []float32{0.37}, bs, []bool{okv}}
				want := runFusedCase(t, backends[1], c, shape, in, false, false)
				for p, be := range backends {
					for _, donate := range []bool{false, true} {
						name := fmt.Sprintf("%s %v ok=%v p=%d donate=%v", c.name, dims, okv, p, donate)
						got := runFusedCase(t, be, c, shape, in, true, donate)
						if len(got) != len(want) {
							t.Fatalf("%s: %d outputs, want %d", name, len(got), len(want))
						}
						for i := range want {
							sameBits(t, fmt.Sprintf("%s output %d", name, i), got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// fusedCases are the graphs of TestFusedElementwiseMatchesUnfused; must fails the test on an error.
func fusedCases(must func(compute.Value, error) compute.Value) []fusedCase {
	return []fusedCase{
		{"adamw", 4, func(fn compute.Function, x, y, z, s, b, ok compute.Value) []compute.Value {
			// g = where(ok, grad·scale, 0); m2 = m·β1 + g·(1-β1); v2 = v·β2 + g²·(1-β2);
			// w2 = w·decay − m2/(√v2 + ε)·step, with x = grad, y = m, z = v (w = y + z).
			c := func(v float32) compute.Value { return must(fn.Constant([]float32{v})) }
			sc := func(v float32) compute.Value { return must(fn.Reshape(c(v))) }
			zero := sc(0)
			g := must(fn.Where(ok, must(fn.Mul(x, s)), zero))
			m2 := must(fn.Add(must(fn.Mul(y, sc(0.9))), must(fn.Mul(g, sc(0.1)))))
			v2 := must(fn.Add(must(fn.Mul(z, sc(0.999))), must(fn.Mul(must(fn.Mul(g, g)), sc(0.001)))))
			w := must(fn.Add(y, z))
			upd := must(fn.Mul(must(fn.Div(m2, must(fn.Add(must(fn.Sqrt(v2)), sc(1e-8))))), s))
			w2 := must(fn.Sub(must(fn.Mul(w, sc(0.99))), upd))
			return []compute.Value{w2, m2, v2}
		}},
		{"silu", 1, func(fn compute.Function, x, y, z, s, b, ok compute.Value) []compute.Value {
			// The gated MLP's SiLU forward and backward: a = x·σ(x), h = a·y; with z = dh:
			// dy = z·a, dx = z·y·(σ + a·(1 − σ)).
			sig := must(fn.Logistic(x))
			a := must(fn.Mul(x, sig))
			one := must(fn.Reshape(must(fn.Constant([]float32{1}))))
			dx := must(fn.Mul(must(fn.Mul(z, y)), must(fn.Add(sig, must(fn.Mul(a, must(fn.Sub(one, sig))))))))
			return []compute.Value{must(fn.Mul(a, y)), must(fn.Mul(z, a)), dx}
		}},
		{"unary", 1, func(fn compute.Function, x, y, z, s, b, ok compute.Value) []compute.Value {
			silu := must(fn.Mul(must(fn.Mul(x, must(fn.Logistic(x)))), y))
			e := must(fn.Add(must(fn.Exp(x)), must(fn.Log(must(fn.Abs(y))))))
			tr := must(fn.Mul(must(fn.Tanh(z)), must(fn.Rsqrt(must(fn.Abs(x))))))
			cs := must(fn.Sub(must(fn.Cos(x)), must(fn.Neg(must(fn.Sin(y))))))
			return []compute.Value{must(fn.Add(must(fn.Add(silu, e)), must(fn.Sub(tr, cs))))}
		}},
		{"scalar-left", 1, func(fn compute.Function, x, y, z, s, b, ok compute.Value) []compute.Value {
			a := must(fn.Sub(s, x))                   // s − x
			d := must(fn.Div(s, must(fn.Add(y, s))))  // s / (y + s)
			mx := must(fn.Max(s, must(fn.Min(z, s)))) // max(s, min(z, s))
			mn := must(fn.Min(must(fn.Mul(s, x)), must(fn.Max(y, z))))
			return []compute.Value{must(fn.Add(must(fn.Add(a, d)), must(fn.Sub(mx, mn))))}
		}},
		{"where", 2, func(fn compute.Function, x, y, z, s, b, ok compute.Value) []compute.Value {
			w1 := must(fn.Where(b, must(fn.Mul(x, s)), must(fn.Neg(y))))
			w2 := must(fn.Where(b, s, must(fn.Add(z, x)))) // scalar on the true side
			w3 := must(fn.Where(ok, must(fn.Sub(y, z)), s))
			shared := must(fn.Mul(w1, w2)) // two uses: a root of its own, not inside another tree
			return []compute.Value{must(fn.Add(shared, w3)), must(fn.Sub(shared, x))}
		}},
	}
}

// runFusedCase compiles c with the pass on or off, checks that the pass fused c.fused trees (or
// none), and returns the outputs.
func runFusedCase(t *testing.T, be *gobackend.Backend, c fusedCase, shape shapes.Shape, in []any, fuse, donate bool) [][]float32 {
	t.Helper()
	exec, bufs := compileFused(t, be, c, shape, in, fuse)
	var donated []bool
	if donate {
		donated = []bool{true, true, true, true, true, true}
	}
	results, err := exec.Execute(bufs, donated, 0)
	if err != nil {
		t.Fatalf("%s: execute: %+v", c.name, err)
	}
	got := make([][]float32, len(results))
	for i, r := range results {
		got[i] = append([]float32(nil), r.(*gobackend.Buffer).Flat.([]float32)...)
	}
	return got
}

// BenchmarkFusedElementwise times graphs of the test with the pass on and off on a base-preset
// activation ([2048, 1024]: the MLP's) on the default backend; alternate with -count:
//
//	cd third_party/compute && GOEXPERIMENT=simd go test ./internal/gobackend/ops/ -run '^$' -bench FusedElementwise -count 5
func BenchmarkFusedElementwise(b *testing.B) {
	cases := map[string]fusedCase{}
	for _, c := range fusedCases(func(v compute.Value, err error) compute.Value {
		if err != nil {
			b.Fatal(err)
		}
		return v
	}) {
		cases[c.name] = c
	}
	cb, err := gobackend.New("ops_sequential") // as Temper's runtime runs training
	if err != nil {
		b.Fatal(err)
	}
	be := cb.(*gobackend.Backend)
	defer be.Finalize()
	shape := shapes.Make(dtypes.Float32, 2048, 1024)
	rng := rand.New(rand.NewPCG(39, 8))
	n := shape.Size()
	bs := make([]bool, n)
	in := []any{randomFloats(rng, n), randomFloats(rng, n), randomFloats(rng, n), []float32{0.37}, bs, []bool{true}}
	for _, name := range []string{"adamw", "silu"} {
		for _, fuse := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/fuse=%v", name, fuse), func(b *testing.B) {
				exec, bufs := compileFused(b, be, cases[name], shape, in, fuse)
				b.ResetTimer()
				cpu0 := processCPUSeconds(b)
				for range b.N {
					outs, err := exec.Execute(bufs, nil, 0)
					if err != nil {
						b.Fatal(err)
					}
					for _, o := range outs {
						if err := o.Finalize(); err != nil {
							b.Fatal(err)
						}
					}
				}
				// On a machine shared with other jobs, the process's CPU time is steadier than wall time.
				b.ReportMetric((processCPUSeconds(b)-cpu0)*1e3/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// compileFused compiles c with the pass on or off, checks that the pass fused c.fused trees (or
// none; any number when c.fused is -1) and returns the executable and fresh input buffers.
func compileFused(t testing.TB, be *gobackend.Backend, c fusedCase, shape shapes.Shape, in []any, fuse bool) (compute.Executable, []compute.Buffer) {
	t.Helper()
	saved := FuseElementwise
	FuseElementwise = fuse
	defer func() { FuseElementwise = saved }()
	builder := be.Builder("fused_" + c.name)
	fn := builder.Main()
	bshape := shapes.Make(dtypes.Bool, shape.Dimensions...)
	inShapes := []shapes.Shape{shape, shape, shape, shapes.Make(dtypes.Float32), bshape, shapes.Make(dtypes.Bool)}
	params := make([]compute.Value, len(inShapes))
	for i, s := range inShapes {
		p, err := fn.Parameter(fmt.Sprintf("p%d", i), s, nil)
		if err != nil {
			t.Fatal(err)
		}
		params[i] = p
	}
	outs := c.build(fn, params[0], params[1], params[2], params[3], params[4], params[5])
	if err := fn.Return(outs, nil); err != nil {
		t.Fatal(err)
	}
	exec, err := builder.Compile()
	if err != nil {
		t.Fatalf("%s: compile: %+v", c.name, err)
	}
	fused := 0
	for _, node := range builder.(*gobackend.Builder).MainFn.Nodes {
		if node.OpType == compute.OpTypeFusedElementwise {
			fused++
		}
	}
	if want := map[bool]int{true: c.fused, false: 0}[fuse]; want >= 0 && fused != want {
		t.Fatalf("%s (fuse=%v): %d fused trees, want %d", c.name, fuse, fused, want)
	}
	bufs := make([]compute.Buffer, len(in))
	for i, flat := range in {
		var cp any
		switch v := flat.(type) {
		case []float32:
			cp = append([]float32(nil), v...)
		case []bool:
			cp = append([]bool(nil), v...)
		}
		if bufs[i], err = be.BufferFromFlatData(0, cp, inShapes[i]); err != nil {
			t.Fatal(err)
		}
	}
	return exec, bufs
}

// processCPUSeconds is the process's user + system CPU time so far.
func processCPUSeconds(t testing.TB) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
