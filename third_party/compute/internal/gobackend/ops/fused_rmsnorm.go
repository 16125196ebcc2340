// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"math"
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/workerspool"
	"github.com/gomlx/compute/internal/simdstate"
	"github.com/gomlx/compute/support/envutil"
)

// RMSNorm fusion. GoMLX builds y = x / √(mean(x²) + ε) · w over the last axis as nine ops
// (Mul(x, x), ReduceSum, Mul by 1/n, Reshape, Add ε, Sqrt, Div with a broadcast divisor, Reshape of
// w, Mul), each a dispatch and most a buffer: a decoding step of small rows spends more in them
// than in their arithmetic. The compilation pass below rewrites the chain, when its inner results
// have no other use (the training forward's are reused by the backward pass, so it keeps its
// ops), into one OpTypeFusedRMSNorm node computing each row with the same float32 operations in
// the same order (the sum of squares in ReduceSum's order, first to last): the same bits as
// unfused.

// FuseRMSNorm is false when GOMLX_FUSE_RMSNORM=false; on by default. It never changes results.
var FuseRMSNorm = envutil.MustReadBool("GOMLX_FUSE_RMSNORM", true)

func init() {
	gobackend.RegisterTransformation(60, fuseRMSNormPass{})
	gobackend.SetNodeExecutor(compute.OpTypeFusedRMSNorm, gobackend.PriorityGeneric, execFusedRMSNorm)
}

// rmsNormData is a fused RMSNorm node's Data: whether the mean divides the sum by its input
// (Div) rather than multiplying (Mul). The node's inputs are x, w, that scalar and ε.
type rmsNormData struct{ divMean bool }

type fuseRMSNormPass struct{}

// Name implements gobackend.GraphTransformation.
func (fuseRMSNormPass) Name() string { return "FuseRMSNorm" }

// Apply implements gobackend.GraphTransformation: the root Mul becomes the fused node, in place.
func (fuseRMSNormPass) Apply(b *gobackend.Builder) (bool, error) {
	if !FuseRMSNorm {
		return false, nil
	}
	forEachFusionFunction(b, func(g *fusionGraph) {
		for idx := len(g.f.Nodes) - 1; idx >= 0; idx-- {
			root := g.f.Nodes[idx]
			if g.absorbed[idx] || g.pinned[root] {
				continue
			}
			inputs, data, inner := matchRMSNorm(g, root)
			if inputs == nil {
				continue
			}
			for _, n := range inner {
				g.absorbed[n.Index] = true
			}
			root.OpType = compute.OpTypeFusedRMSNorm
			root.Inputs = inputs
			root.Data = data
		}
	})
	return false, nil
}

// matchRMSNorm matches root = Mul(Div(x, Sqrt(Add(Mul(ReduceSum(Mul(x, x), last), c), ε))), w)
// (either operand order of each Mul but the squares' and of the Add; the mean's Mul may be a Div by
// c; a Reshape may sit before or after the mean's Mul or Div), x float32 [..., D], the divisor
// [..., 1], w [1, ..., 1, D] (taken before its Reshape when it has one of its own), c and ε
// single elements, and every node between x and root used only there. It returns the fused node's inputs (x, w, c, ε), its Data and the inner nodes, or nils.
func matchRMSNorm(g *fusionGraph, root *gobackend.Node) ([]*gobackend.Node, *rmsNormData, []*gobackend.Node) {
	if root.OpType != compute.OpTypeMul || len(root.Inputs) != 2 || !plainFloat32(root) || root.Shape.Rank() < 1 ||
		root.IsNodeSelectOutput || len(root.CapturedInputs) > 0 {
		return nil, nil, nil
	}
	rank := root.Shape.Rank()
	d := root.Shape.Dim(-1)
	rowShape := root.Shape.Clone()
	rowShape.Dimensions[rank-1] = 1
	single := func(n *gobackend.Node) bool { return plainFloat32(n) && n.Shape.Size() == 1 }
	// chain steps through an optional private Reshape.
	reshaped := func(n *gobackend.Node, inner []*gobackend.Node) (*gobackend.Node, []*gobackend.Node) {
		if n.OpType == compute.OpTypeReshape && len(n.Inputs) == 1 && g.private(n, 1) {
			return n.Inputs[0], append(inner, n)
		}
		return n, inner
	}
	for side := range 2 {
		div, w := root.Inputs[side], root.Inputs[1-side]
		if div.OpType != compute.OpTypeDiv || len(div.Inputs) != 2 || !g.private(div, 1) || !plainFloat32(w) ||
			w.Shape.Rank() != rank || w.Shape.Dim(-1) != d || w.Shape.Size() != d || !div.Shape.Equal(root.Shape) {
			continue
		}
		x, q := div.Inputs[0], div.Inputs[1]
		if !plainFloat32(x) || !x.Shape.Equal(root.Shape) || x == w || q.OpType != compute.OpTypeSqrt ||
			len(q.Inputs) != 1 || !g.private(q, 1) || !q.Shape.Equal(rowShape) {
			continue
		}
		add := q.Inputs[0]
		if add.OpType != compute.OpTypeAdd || len(add.Inputs) != 2 || !g.private(add, 1) || !add.Shape.Equal(rowShape) {
			continue
		}
		for addSide := range 2 {
			eps := add.Inputs[1-addSide]
			mean, inner := reshaped(add.Inputs[addSide], []*gobackend.Node{div, q, add})
			if !single(eps) || (mean.OpType != compute.OpTypeMul && mean.OpType != compute.OpTypeDiv) ||
				len(mean.Inputs) != 2 || !g.private(mean, 1) || mean.Shape.Size() != rowShape.Size() {
				continue
			}
			inner = append(inner, mean)
			for meanSide := range 2 {
				if mean.OpType == compute.OpTypeDiv && meanSide == 1 {
					break // s / c only
				}
				c := mean.Inputs[1-meanSide]
				sum, inner := reshaped(mean.Inputs[meanSide], inner)
				if !single(c) || sum.OpType != compute.OpTypeReduceSum || len(sum.Inputs) != 1 || !g.private(sum, 1) ||
					sum.Shape.Size() != rowShape.Size() {
					continue
				}
				if axes, ok := sum.Data.([]int); !ok || !slices.Equal(axes, []int{rank - 1}) {
					continue
				}
				sq := sum.Inputs[0]
				if sq.OpType != compute.OpTypeMul || len(sq.Inputs) != 2 || sq.Inputs[0] != x || sq.Inputs[1] != x ||
					!g.private(sq, 1) || !sq.Shape.Equal(x.Shape) {
					continue
				}
				inner = append(inner, sum, sq)
				if w.OpType == compute.OpTypeReshape && len(w.Inputs) == 1 && g.private(w, 1) && plainFloat32(w.Inputs[0]) {
					// The weight's own Reshape to [1, ..., 1, D]: the kernel reads its D elements
					// flat, so it takes them unreshaped (a Reshape of a buffer the executor does not
					// own, a parameter's, copies it).
					inner = append(inner, w)
					w = w.Inputs[0]
				}
				return []*gobackend.Node{x, w, c, eps}, &rmsNormData{divMean: mean.OpType == compute.OpTypeDiv}, inner
			}
		}
	}
	return nil, nil, nil
}

// execFusedRMSNorm normalises each row of x: s = Σ x² summed first to last (ReduceSum's fold, each
// square rounded to float32 as the Mul writes it), m = s·c (or s/c), q = √(m + ε), y = (x / q)·w,
// every operation rounded to float32 as the unfused ops round it. Rows are split across the
// backend's workers for large inputs; the output reuses x's buffer when the executor owns it.
func execFusedRMSNorm(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, inputsOwned []bool) (*gobackend.Buffer, error) {
	data := node.Data.(*rmsNormData)
	n := node.Shape.Size()
	d := node.Shape.Dim(-1)
	x := inputs[0].Flat.([]float32)[:n]
	w := inputs[1].Flat.([]float32)[:d]
	c := inputs[2].Flat.([]float32)[0]
	eps := inputs[3].Flat.([]float32)[0]
	var output *gobackend.Buffer
	if inputsOwned[0] && inputs[0].RawShape.Equal(node.Shape) && inputs[1] != inputs[0] {
		output = inputs[0]
		inputs[0] = nil // the executor's contract for a reused input
	} else {
		var err error
		if output, err = backend.GetBuffer(node.Shape); err != nil {
			return nil, err
		}
	}
	if n == 0 || d == 0 {
		return output, nil
	}
	out := output.Flat.([]float32)[:n]
	rows := n / d
	div := kernelsFor[float32](binaryDiv, divKernels[float32])
	mul := kernelsFor[float32](binaryMul, mulKernels[float32])
	run := func(lo, hi int) {
		scratch := fusedScratch.Get().(*[]float32)
		defer fusedScratch.Put(scratch)
		if len(*scratch) < hi-lo {
			*scratch = make([]float32, max(hi-lo, fusedChunk))
		}
		qs := (*scratch)[:hi-lo]
		simdstate.ClearUpper() // the scalar loop after vector kernels (see runFusedChunk)
		r := lo
		for ; r+4 <= hi; r += 4 { // four rows' sums at once: four independent chains of adds
			x0, x1, x2, x3 := x[r*d:(r+1)*d], x[(r+1)*d:(r+2)*d], x[(r+2)*d:(r+3)*d], x[(r+3)*d:(r+4)*d]
			x1, x2, x3 = x1[:len(x0)], x2[:len(x0)], x3[:len(x0)]
			var s0, s1, s2, s3 float32
			for j := range x0 {
				s0 += float32(x0[j] * x0[j])
				s1 += float32(x1[j] * x1[j])
				s2 += float32(x2[j] * x2[j])
				s3 += float32(x3[j] * x3[j])
			}
			qs[r-lo], qs[r+1-lo], qs[r+2-lo], qs[r+3-lo] = s0, s1, s2, s3
		}
		for ; r < hi; r++ {
			var s float32
			for _, v := range x[r*d : (r+1)*d] {
				s += float32(v * v) // the conversions keep each operation rounded (no fused multiply-add)
			}
			qs[r-lo] = s
		}
		for i, s := range qs {
			var m float32
			if data.divMean {
				m = float32(s / c)
			} else {
				m = float32(s * c)
			}
			qs[i] = float32(math.Sqrt(float64(float32(m + eps)))) // correctly rounded, as VSQRTPS
		}
		for r := lo; r < hi; r++ {
			row := out[r*d : (r+1)*d]
			div.vs(row, x[r*d:(r+1)*d], qs[r-lo])
			mul.vv(row, row, w)
		}
	}
	if n < parallelMinElements || rows < 2 || !workerspool.ParallelOps {
		run(0, rows)
	} else {
		parallelFor(backend, rows, max(1, parallelMinElements/4/d), 1, run)
	}
	return output, nil
}
