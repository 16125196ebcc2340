// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/workerspool"
	"github.com/gomlx/compute/support/envutil"
)

// GLU fusion. A gated MLP's decoding step computes y = x·W_gate|up once and then
// h = SiLU(gate)·up = (a·σ(a))·b, with a and b the two halves of y's last axis: two Slice copies,
// a Logistic and two Muls, each writing a [rows, f] tensor. The compilation pass below rewrites
// that chain, when its inner results have no other use, into one OpTypeFusedGLU node that reads
// y row by row and writes h, with the very kernels the ops run alone (the vectorised logistic,
// runsBinary's float32 Mul): every element gets the same bits as unfused.

// FuseGLU is false when GOMLX_FUSE_GLU=false; on by default. It never changes results.
var FuseGLU = envutil.MustReadBool("GOMLX_FUSE_GLU", true)

func init() {
	gobackend.RegisterTransformation(60, fuseGLUPass{})
	gobackend.SetNodeExecutor(compute.OpTypeFusedGLU, gobackend.PriorityGeneric, execFusedGLU)
}

type fuseGLUPass struct{}

// Name implements gobackend.GraphTransformation.
func (fuseGLUPass) Name() string { return "FuseGLU" }

// Apply implements gobackend.GraphTransformation: the root Mul becomes the fused node, in place
// (its inner nodes lose their only use and are never executed).
func (fuseGLUPass) Apply(b *gobackend.Builder) (bool, error) {
	if !FuseGLU {
		return false, nil
	}
	forEachFusionFunction(b, func(g *fusionGraph) {
		for idx := len(g.f.Nodes) - 1; idx >= 0; idx-- {
			root := g.f.Nodes[idx]
			if g.absorbed[idx] || g.pinned[root] {
				continue
			}
			y, inner := matchGLU(g, root)
			if y == nil {
				continue
			}
			for _, n := range inner {
				g.absorbed[n.Index] = true
			}
			root.OpType = compute.OpTypeFusedGLU
			root.Inputs = []*gobackend.Node{y}
			root.Data = nil
		}
	})
	return false, nil
}

// fusionGraph is what the fusion passes know of one function: who consumes each node, which
// nodes are outputs or captured by closures (they keep their own node), and which nodes a
// rewrite has already absorbed.
type fusionGraph struct {
	f         *gobackend.Function
	consumers []int // distinct nodes using each node
	outputs   map[*gobackend.Node]bool
	pinned    map[*gobackend.Node]bool
	absorbed  []bool
}

// forEachFusionFunction calls fn with every function of b, the main function first.
func forEachFusionFunction(b *gobackend.Builder, fn func(g *fusionGraph)) {
	pinned := map[*gobackend.Node]bool{}
	for _, f := range b.Functions {
		for _, p := range f.CapturedParentNodes {
			pinned[p] = true
		}
	}
	var fns []*gobackend.Function
	if b.MainFn != nil {
		fns = append(fns, b.MainFn)
	}
	for _, f := range b.Functions {
		if f != b.MainFn {
			fns = append(fns, f)
		}
	}
	for _, f := range fns {
		n := len(f.Nodes)
		g := &fusionGraph{f: f, consumers: make([]int, n), outputs: map[*gobackend.Node]bool{}, pinned: pinned,
			absorbed: make([]bool, n)}
		for _, node := range f.Nodes {
			for i, in := range node.Inputs {
				if in.Function != f || in.Index >= n || f.Nodes[in.Index] != in || seenBefore(node.Inputs, i) {
					continue
				}
				g.consumers[in.Index]++
			}
			for _, captures := range node.CapturedInputs {
				for _, c := range captures {
					pinned[c] = true
				}
			}
		}
		for _, o := range f.Outputs {
			g.outputs[o] = true
		}
		fn(g)
	}
}

// private reports whether node is a plain float32 node of g's function whose result only `uses`
// distinct nodes consume, that is not an output, not captured and not already absorbed.
func (g *fusionGraph) private(node *gobackend.Node, uses int) bool {
	n := len(g.f.Nodes)
	return node.Function == g.f && node.Index < n && g.f.Nodes[node.Index] == node && !g.pinned[node] &&
		!g.outputs[node] && !g.absorbed[node.Index] && g.consumers[node.Index] == uses &&
		!node.IsMultiOutputs() && !node.IsNodeSelectOutput && len(node.CapturedInputs) == 0 &&
		node.Shape.DType == dtypes.Float32 && !node.Shape.IsDynamic()
}

// plainFloat32 reports whether node's single result is a static float32 tensor.
func plainFloat32(node *gobackend.Node) bool {
	return node.Shape.DType == dtypes.Float32 && !node.Shape.IsDynamic() && !node.IsMultiOutputs()
}

// matchGLU matches root = Mul(Mul(a, Logistic(a)), b), either operand order of either Mul, with
// a = y[..., :f] and b = y[..., f:2f] unit-stride slices of the last axis of a float32 y whole on
// its other axes, and the slices, the Logistic and the inner Mul used only there. It returns y
// and the inner nodes, or nil.
func matchGLU(g *fusionGraph, root *gobackend.Node) (*gobackend.Node, []*gobackend.Node) {
	if root.OpType != compute.OpTypeMul || len(root.Inputs) != 2 || !plainFloat32(root) || root.Shape.Rank() < 1 ||
		root.IsNodeSelectOutput || len(root.CapturedInputs) > 0 {
		return nil, nil
	}
	for side := range 2 {
		inner, b := root.Inputs[side], root.Inputs[1-side]
		if inner == b || inner.OpType != compute.OpTypeMul || len(inner.Inputs) != 2 || !g.private(inner, 1) {
			continue
		}
		for s := range 2 {
			a, sig := inner.Inputs[s], inner.Inputs[1-s]
			if sig.OpType != compute.OpTypeLogistic || len(sig.Inputs) != 1 || sig.Inputs[0] != a ||
				b == a || !g.private(sig, 1) || !g.private(a, 2) || !g.private(b, 1) {
				continue
			}
			y := gluHalves(a, b)
			if y == nil || !root.Shape.Equal(a.Shape) || !inner.Shape.Equal(a.Shape) || !sig.Shape.Equal(a.Shape) {
				continue
			}
			return y, []*gobackend.Node{inner, sig, a, b}
		}
	}
	return nil, nil
}

// gluHalves returns y when a = y[..., :f] and b = y[..., f:2f] (unit-stride Slices of one float32
// y, whole on its other axes), else nil.
func gluHalves(a, b *gobackend.Node) *gobackend.Node {
	if a.OpType != compute.OpTypeSlice || b.OpType != compute.OpTypeSlice || len(a.Inputs) != 1 || len(b.Inputs) != 1 ||
		a.Inputs[0] != b.Inputs[0] {
		return nil
	}
	y := a.Inputs[0]
	if !plainFloat32(y) || y.IsNodeSelectOutput {
		return nil
	}
	rank := y.Shape.Rank()
	if rank < 1 || y.Shape.Dim(-1)%2 != 0 {
		return nil
	}
	f := y.Shape.Dim(-1) / 2
	sa, okA := a.Data.(*sliceNode)
	sb, okB := b.Data.(*sliceNode)
	if !okA || !okB {
		return nil
	}
	for _, c := range []struct {
		s  *sliceNode
		lo int
	}{{sa, 0}, {sb, f}} {
		if len(c.s.starts) != rank || len(c.s.limits) != rank || len(c.s.strides) != rank {
			return nil
		}
		for ax := range rank {
			lo, hi := 0, y.Shape.Dimensions[ax]
			if ax == rank-1 {
				lo, hi = c.lo, c.lo+f
			}
			if c.s.starts[ax] != lo || c.s.limits[ax] != hi || c.s.strides[ax] != 1 {
				return nil
			}
		}
	}
	return y
}

// execFusedGLU computes h[r, :] = (a·σ(a))·b with a = y[r, :f] and b = y[r, f:], row by row in
// chunks of fusedChunk columns (the chunk's intermediate stays in L1), rows split across the
// backend's workers for large outputs. Each element is computed by the kernels of the unfused
// ops in their order: σ by the vectorised logistic (the same bits in any position), then the two
// products, each rounded to float32.
func execFusedGLU(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, _ []bool) (*gobackend.Buffer, error) {
	output, err := backend.GetBuffer(node.Shape)
	if err != nil {
		return nil, err
	}
	n := node.Shape.Size()
	f := node.Shape.Dim(-1)
	if n == 0 || f == 0 {
		return output, nil
	}
	y := inputs[0].Flat.([]float32)[:2*n]
	out := output.Flat.([]float32)[:n]
	rows := n / f
	mul := kernelsFor[float32](binaryMul, mulKernels[float32])
	chunk := min(f, fusedChunk)
	run := func(lo, hi int) {
		scratch := fusedScratch.Get().(*[]float32)
		defer fusedScratch.Put(scratch)
		if len(*scratch) < chunk {
			*scratch = make([]float32, max(chunk, fusedChunk))
		}
		for r := lo; r < hi; r++ {
			row := y[2*r*f : 2*(r+1)*f]
			for c := 0; c < f; c += chunk {
				e := min(c+chunk, f)
				a, b, tmp := row[c:e], row[f+c:f+e], (*scratch)[:e-c]
				execLogisticFloat32(a, tmp)
				mul.vv(tmp, a, tmp)
				mul.vv(out[r*f+c:r*f+e], tmp, b)
			}
		}
	}
	if n < parallelMinElements || rows < 2 || !workerspool.ParallelOps {
		run(0, rows)
	} else {
		parallelFor(backend, rows, max(1, parallelMinElements/4/f), 1, run)
	}
	return output, nil
}
