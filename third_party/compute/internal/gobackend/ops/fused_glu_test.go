// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// patternCase builds a graph from parameters p[0], p[1] of shapes given by the test, and wants
// `fused` nodes of the fused op type with the pass on.
type patternCase struct {
	name  string
	fused int
	build func(fn compute.Function, p []compute.Value) []compute.Value
}

// runPattern compiles c with the switch *flag set to fuse, checks the number of nodes of opType,
// runs it and returns the outputs.
func runPattern(t *testing.T, be *gobackend.Backend, flag *bool, opType compute.OpType, c patternCase,
	inShapes []shapes.Shape, in [][]float32, fuse, donate bool) [][]float32 {
	t.Helper()
	saved := *flag
	*flag = fuse
	defer func() { *flag = saved }()
	builder := be.Builder("pattern_" + c.name)
	fn := builder.Main()
	params := make([]compute.Value, len(inShapes))
	for i, s := range inShapes {
		p, err := fn.Parameter(fmt.Sprintf("p%d", i), s, nil)
		if err != nil {
			t.Fatal(err)
		}
		params[i] = p
	}
	if err := fn.Return(c.build(fn, params), nil); err != nil {
		t.Fatal(err)
	}
	exec, err := builder.Compile()
	if err != nil {
		t.Fatalf("%s: compile: %+v", c.name, err)
	}
	fused := 0
	for _, node := range builder.(*gobackend.Builder).MainFn.Nodes {
		if node.OpType == opType {
			fused++
		}
	}
	if want := map[bool]int{true: c.fused, false: 0}[fuse]; fused != want {
		t.Fatalf("%s (fuse=%v): %d %s nodes, want %d", c.name, fuse, fused, opType, want)
	}
	bufs := make([]compute.Buffer, len(in))
	for i, flat := range in {
		if bufs[i], err = be.BufferFromFlatData(0, append([]float32(nil), flat...), inShapes[i]); err != nil {
			t.Fatal(err)
		}
	}
	var donated []bool
	if donate {
		donated = make([]bool, len(in))
		for i := range donated {
			donated[i] = true
		}
	}
	results, err := exec.Execute(bufs, donated, 0)
	if err != nil {
		t.Fatalf("%s: execute: %+v", c.name, err)
	}
	got := make([][]float32, len(results))
	for i, r := range results {
		got[i] = append([]float32(nil), r.(*gobackend.Buffer).Flat.([]float32)[:r.(*gobackend.Buffer).RawShape.Size()]...)
	}
	return got
}

// checkPatterns runs every case with the fusion on, on one to three workers, inputs donated or
// not, and wants the unfused graph's bits.
func checkPatterns(t *testing.T, flag *bool, opType compute.OpType, cases []patternCase, inShapes []shapes.Shape, in [][]float32) {
	t.Helper()
	backends := parallelBackends(t)
	for _, c := range cases {
		want := runPattern(t, backends[1], flag, opType, c, inShapes, in, false, false)
		for p, be := range backends {
			for _, donate := range []bool{false, true} {
				got := runPattern(t, be, flag, opType, c, inShapes, in, true, donate)
				if len(got) != len(want) {
					t.Fatalf("%s: %d outputs, want %d", c.name, len(got), len(want))
				}
				for i := range want {
					sameBits(t, fmt.Sprintf("%s %v p=%d donate=%v output %d", c.name, inShapes[0], p, donate, i), got[i], want[i])
				}
			}
		}
	}
}

func mustValue(t *testing.T) func(compute.Value, error) compute.Value {
	return func(v compute.Value, err error) compute.Value {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestFusedGLUMatchesUnfused: (a·σ(a))·b over the halves of y's last axis gives the unfused ops'
// bits with the pass on (either operand order of both Muls, ragged widths below, around and
// above the chunk, a row count split across workers), and the pass leaves the chain alone when an
// inner result has another use, is an output, or the slices are not the two halves.
func TestFusedGLUMatchesUnfused(t *testing.T) {
	must := mustValue(t)
	rng := rand.New(rand.NewPCG(39, 11))
	for _, dims := range [][]int{{5, 2 * 37}, {64, 2 * 1024}, {3, 4, 2 * 1100}, {1, 2 * 16}, {7, 2}, {2 * 9}} {
		rank := len(dims)
		f := dims[rank-1] / 2
		half := func(fn compute.Function, y compute.Value, lo, hi int) compute.Value {
			starts, limits := make([]int, rank), append([]int(nil), dims...)
			starts[rank-1], limits[rank-1] = lo, hi
			return must(fn.Slice(y, starts, limits, nil))
		}
		glu := func(fn compute.Function, y compute.Value, swapInner, swapOuter bool) (a, sig, inner, b, h compute.Value) {
			a, b = half(fn, y, 0, f), half(fn, y, f, 2*f)
			sig = must(fn.Logistic(a))
			if swapInner {
				inner = must(fn.Mul(sig, a))
			} else {
				inner = must(fn.Mul(a, sig))
			}
			if swapOuter {
				h = must(fn.Mul(b, inner))
			} else {
				h = must(fn.Mul(inner, b))
			}
			return
		}
		cases := []patternCase{
			{"glu", 1, func(fn compute.Function, p []compute.Value) []compute.Value {
				_, _, _, _, h := glu(fn, p[0], false, false)
				return []compute.Value{h}
			}},
			{"glu-swapped", 1, func(fn compute.Function, p []compute.Value) []compute.Value {
				_, _, _, _, h := glu(fn, p[0], true, true)
				return []compute.Value{h}
			}},
			{"glu-of-product", 1, func(fn compute.Function, p []compute.Value) []compute.Value {
				y := must(fn.Add(p[0], p[0])) // y an op's result, used twice by one node
				_, _, _, _, h := glu(fn, y, true, false)
				return []compute.Value{must(fn.Add(h, h))}
			}},
			{"two-glus", 2, func(fn compute.Function, p []compute.Value) []compute.Value {
				_, _, _, _, h1 := glu(fn, p[0], false, true)
				_, _, _, _, h2 := glu(fn, must(fn.Neg(p[0])), true, false)
				return []compute.Value{h1, h2}
			}},
			{"sigma-output", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				_, sig, _, _, h := glu(fn, p[0], false, false)
				return []compute.Value{h, sig}
			}},
			{"inner-output", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				_, _, inner, _, h := glu(fn, p[0], false, false)
				return []compute.Value{h, inner}
			}},
			{"gate-used-again", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				a, _, _, _, h := glu(fn, p[0], false, false)
				return []compute.Value{must(fn.Add(h, must(fn.Neg(a))))}
			}},
			{"up-used-again", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				_, _, _, b, h := glu(fn, p[0], true, false)
				return []compute.Value{must(fn.Sub(h, b))}
			}},
			{"sigma-used-again", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				_, sig, _, _, h := glu(fn, p[0], false, false)
				return []compute.Value{must(fn.Mul(h, sig))}
			}},
			{"not-halves", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				if f < 2 {
					a := half(fn, p[0], 0, f)
					return []compute.Value{must(fn.Mul(must(fn.Mul(a, must(fn.Logistic(a)))), a))}
				}
				a, b := half(fn, p[0], 0, f-1), half(fn, p[0], f, 2*f-1)
				return []compute.Value{must(fn.Mul(must(fn.Mul(a, must(fn.Logistic(a)))), b))}
			}},
			{"gate-times-gate", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				a := half(fn, p[0], 0, f) // (a·σ(a))·a: b is a
				return []compute.Value{must(fn.Mul(must(fn.Mul(a, must(fn.Logistic(a)))), a))}
			}},
		}
		shape := shapes.Make(dtypes.Float32, dims...)
		y := randomFloats(rng, shape.Size())
		for i := range y {
			y[i] *= 4 // σ's saturated ranges too
		}
		checkPatterns(t, &FuseGLU, compute.OpTypeFusedGLU, cases, []shapes.Shape{shape}, [][]float32{y})
	}
}

// TestFusedRMSNormMatchesUnfused: x / √(mean(x²) + ε) · w over the last axis, as GoMLX builds it
// (and with the mean as a Div, the operands of each commutative op swapped, no Reshape), gives the
// unfused ops' bits with the pass on, for ragged widths, rows split across workers and x's buffer
// donated; the pass leaves the chain alone when an intermediate has another use or is an output,
// or the reduction is not over the last axis alone.
func TestFusedRMSNormMatchesUnfused(t *testing.T) {
	must := mustValue(t)
	rng := rand.New(rand.NewPCG(39, 12))
	for _, dims := range [][]int{{5, 37}, {64, 1, 384}, {2, 3, 1100}, {300, 300}, {1, 17}, {33}, {4, 1}} {
		rank := len(dims)
		d := dims[rank-1]
		rowDims := append([]int(nil), dims...)
		rowDims[rank-1] = 1
		wDims := make([]int, rank)
		for i := range wDims {
			wDims[i] = 1
		}
		wDims[rank-1] = d
		scalar := func(fn compute.Function, v float32) compute.Value {
			return must(fn.Constant([]float32{v}))
		}
		type parts struct{ sq, sum, mean, row, add, q, div, wr, y compute.Value }
		norm := func(fn compute.Function, x, w compute.Value, divMean, swap, noReshape bool) parts {
			var p parts
			p.sq = must(fn.Mul(x, x))
			p.sum = must(fn.ReduceSum(p.sq, rank-1))
			switch {
			case divMean:
				p.mean = must(fn.Div(p.sum, scalar(fn, float32(d))))
			case swap:
				p.mean = must(fn.Mul(scalar(fn, 1/float32(d)), p.sum))
			default:
				p.mean = must(fn.Mul(p.sum, scalar(fn, 1/float32(d))))
			}
			p.row = p.mean
			if !noReshape {
				p.row = must(fn.Reshape(p.mean, rowDims...))
			}
			eps := scalar(fn, 1e-6)
			if swap {
				p.add = must(fn.Add(eps, p.row))
			} else {
				p.add = must(fn.Add(p.row, eps))
			}
			p.q = must(fn.Sqrt(p.add))
			p.div = must(fn.Div(x, p.q))
			p.wr = must(fn.Reshape(w, wDims...))
			if swap {
				p.y = must(fn.Mul(p.wr, p.div))
			} else {
				p.y = must(fn.Mul(p.div, p.wr))
			}
			return p
		}
		cases := []patternCase{
			{"rmsnorm", 1, func(fn compute.Function, p []compute.Value) []compute.Value {
				return []compute.Value{norm(fn, p[0], p[1], false, false, false).y}
			}},
			{"rmsnorm-div-swapped", 1, func(fn compute.Function, p []compute.Value) []compute.Value {
				return []compute.Value{norm(fn, p[0], p[1], true, true, false).y}
			}},
			{"rmsnorm-residual", 2, func(fn compute.Function, p []compute.Value) []compute.Value {
				// x used again (a residual stream), then a second norm of the sum.
				h := norm(fn, p[0], p[1], false, true, false).y
				r := must(fn.Add(p[0], h))
				return []compute.Value{r, norm(fn, r, p[1], false, false, false).y}
			}},
			{"rmsnorm-weight-shared", 1, func(fn compute.Function, p []compute.Value) []compute.Value {
				// The reshaped weight also an output: the norm is fused, the Reshape kept.
				ps := norm(fn, p[0], p[1], false, false, false)
				return []compute.Value{ps.y, ps.wr}
			}},
		}
		if rank > 1 || d > 1 {
			cases = append(cases, patternCase{"rmsnorm-no-reshape", 1, func(fn compute.Function, p []compute.Value) []compute.Value {
				// The mean kept as [..., 1] by the reduction's own shape: ReduceSum then Reshape is
				// the only way to keep the axis, so here the Reshape sits before the mean's Mul.
				sum := must(fn.Reshape(must(fn.ReduceSum(must(fn.Mul(p[0], p[0])), rank-1)), rowDims...))
				q := must(fn.Sqrt(must(fn.Add(must(fn.Mul(sum, scalar(fn, 1/float32(d)))), scalar(fn, 1e-5)))))
				return []compute.Value{must(fn.Mul(must(fn.Div(p[0], q)), must(fn.Reshape(p[1], wDims...))))}
			}})
		}
		for _, inner := range []string{"sq", "sum", "mean", "row", "add", "q", "div"} {
			cases = append(cases, patternCase{inner + "-output", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				ps := norm(fn, p[0], p[1], false, false, false)
				v := map[string]compute.Value{"sq": ps.sq, "sum": ps.sum, "mean": ps.mean, "row": ps.row, "add": ps.add, "q": ps.q, "div": ps.div}[inner]
				return []compute.Value{ps.y, v}
			}}, patternCase{inner + "-used-again", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				ps := norm(fn, p[0], p[1], false, false, false)
				v := map[string]compute.Value{"sq": ps.sq, "sum": ps.sum, "mean": ps.mean, "row": ps.row, "add": ps.add, "q": ps.q, "div": ps.div}[inner]
				return []compute.Value{must(fn.Add(must(fn.ReduceSum(ps.y)), must(fn.ReduceSum(must(fn.Neg(v))))))}
			}})
		}
		if rank > 1 {
			cases = append(cases, patternCase{"not-last-axis", 0, func(fn compute.Function, p []compute.Value) []compute.Value {
				// The sum over every axis, reshaped to [1, ..., 1]: a scalar divisor, not per row.
				ones := make([]int, rank)
				for i := range ones {
					ones[i] = 1
				}
				all := make([]int, rank)
				for i := range all {
					all[i] = i
				}
				sum := must(fn.ReduceSum(must(fn.Mul(p[0], p[0])), all...))
				q := must(fn.Sqrt(must(fn.Add(must(fn.Reshape(must(fn.Mul(sum, scalar(fn, 0.01))), ones...)), scalar(fn, 1e-6)))))
				return []compute.Value{must(fn.Mul(must(fn.Div(p[0], q)), must(fn.Reshape(p[1], wDims...))))}
			}})
		}
		xs := shapes.Make(dtypes.Float32, dims...)
		x, w := randomFloats(rng, xs.Size()), randomFloats(rng, d)
		checkPatterns(t, &FuseRMSNorm, compute.OpTypeFusedRMSNorm, cases, []shapes.Shape{xs, shapes.Make(dtypes.Float32, d)}, [][]float32{x, w})
	}
}
