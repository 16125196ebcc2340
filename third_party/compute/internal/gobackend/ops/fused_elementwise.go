// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/workerspool"
	"github.com/gomlx/compute/internal/simdstate"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/compute/support/envutil"
)

// Elementwise fusion. A training step is full of chains of float32 elementwise ops over whole
// tensors (the optimizer's ~14 ops per parameter, SiLU and its gradient, RoPE, norms): each op
// reads its operands from memory and writes a new tensor, so a chain of k ops moves ~3k tensors
// through the caches and costs k dispatches and k buffers. The compilation pass below rewrites
// every tree of such ops whose inner results have no other use into one OpTypeFusedElementwise
// node, which runs the ops chunk by chunk (fusedChunk elements, so the intermediates stay in L1)
// with the very kernels the ops run alone: every element gets the same bits as unfused.

// FuseElementwise is true when GOMLX_FUSE_ELEMENTWISE=true; off by default. It never changes
// results. It first measured slower on whole training steps because the backend's free list then
// kept 256 MiB, less than a base-preset step's intermediates: each step allocated ~350 MiB afresh,
// which made every elementwise op several times dearer (a [2048, 1024] Mul 2–7 ms instead of 0.7)
// and hid what fusing saved. With the 1 GiB list it wins on training (eight alternating pairs of
// BenchmarkTrainStep/.../sequential: base 708 → 613 ms, median pair ratio 0.86; small 152 → 136 ms,
// 0.91; tpu's TestTrainStepOpProfile, base: elementwise CPU per step 0.205 → 0.159 s) but not on
// cached generation (six pairs: base 1.01, small 1.02 and, with 64Ki as the smallest tree, 1.05:
// the decode graphs' trees cost more fused, not yet understood), so it stays off.
var FuseElementwise = envutil.MustReadBool("GOMLX_FUSE_ELEMENTWISE", false)

const (
	// fusedChunk is how many elements each op of a fused tree computes at a time: the
	// intermediates of a tree of a dozen ops (4 KiB each) stay in the L1 cache.
	fusedChunk = 1024
	// fusedMinElements is the smallest tensor fused: below it the dispatches saved are few and
	// the ops' own buffers are in cache anyway.
	fusedMinElements = 1024
	// fusedMaxSteps bounds a tree (its scratch is fusedMaxSteps × fusedChunk floats).
	fusedMaxSteps = 64
)

func init() {
	gobackend.RegisterTransformation(50, fuseElementwisePass{})
	gobackend.SetNodeExecutor(compute.OpTypeFusedElementwise, gobackend.PriorityGeneric, execFusedElementwise)
}

// fusedArg is an operand of a fused step: an input of the fused node (input ≥ 0) or the result
// of an earlier step (input < 0, step).
type fusedArg struct{ input, step int }

// fusedStep is one op of a fused tree, with its kernel resolved when the tree is made: unary,
// or bin for Add/Sub/Mul/Div (runsBinary's kernels: the same dispatch without its per-call
// interface conversion, which allocated), else runsBinary itself (Max, Min) or Where.
type fusedStep struct {
	op          compute.OpType
	args        []fusedArg
	unary       func(in, out []float32)
	bin         *binaryKernels[float32]
	commutative bool
}

// fusedProgram is a fused node's Data: its steps in execution order; the last is the root,
// whose result is the node's.
type fusedProgram struct{ steps []fusedStep }

// fusedUnaryKernels are the float32 unary kernels that compute every element independently of
// its position (parallel.go splits the same ops by ranges).
var fusedUnaryKernels = func() map[compute.OpType]func(in, out []float32) {
	m := map[compute.OpType]func(in, out []float32){}
	for _, u := range parallelUnaryOps {
		m[u.op] = u.kernel
	}
	return m
}()

// fusedBinaryCommutative lists the binary ops a tree may hold (runsBinary's) and whether the
// executor swaps a scalar left operand to the right, as runsExecutor does.
var fusedBinaryCommutative = func() map[compute.OpType]bool {
	m := map[compute.OpType]bool{}
	for _, o := range runsOps {
		m[o.op] = o.commutative
	}
	return m
}()

// fusedBinaryKernels are runsBinary's float32 kernels of Add, Sub, Mul and Div (nil for the
// other ops); called when a tree is made, after every init has chosen the kernels.
func fusedBinaryKernels(op compute.OpType) *binaryKernels[float32] {
	var k binaryKernels[float32]
	switch op { //nolint:exhaustive
	case compute.OpTypeAdd:
		k = kernelsFor[float32](binaryAdd, addKernels[float32])
	case compute.OpTypeSub:
		k = kernelsFor[float32](binarySub, subKernels[float32])
	case compute.OpTypeMul:
		k = kernelsFor[float32](binaryMul, mulKernels[float32])
	case compute.OpTypeDiv:
		k = kernelsFor[float32](binaryDiv, divKernels[float32])
	default:
		return nil
	}
	return &k
}

type fuseElementwisePass struct{}

// Name implements gobackend.GraphTransformation.
func (fuseElementwisePass) Name() string { return "FuseElementwise" }

// Apply implements gobackend.GraphTransformation: it rewrites each maximal tree in place (the
// root becomes the fused node; the inner nodes lose their only use and are never executed), so
// node order, indices and every other node's inputs stay as they were.
func (fuseElementwisePass) Apply(b *gobackend.Builder) (bool, error) {
	if !FuseElementwise {
		return false, nil
	}
	forEachFusionFunction(b, fuseFunction) // fused_glu.go: consumers, outputs and captured values
	return false, nil
}

// fuseFunction fuses the trees of one function, visiting candidate roots from the last node back
// so each tree is as large as it can be.
func fuseFunction(g *fusionGraph) {
	f, n, consumers, outputs, pinned, absorbed := g.f, len(g.f.Nodes), g.consumers, g.outputs, g.pinned, g.absorbed
	for idx := n - 1; idx >= 0; idx-- {
		root := f.Nodes[idx]
		if absorbed[idx] || pinned[root] || !fusable(root) {
			continue
		}
		size := root.Shape.Size()
		inner := func(in *gobackend.Node) bool {
			return in.Function == f && in.Index < n && f.Nodes[in.Index] == in && !pinned[in] && !outputs[in] &&
				consumers[in.Index] == 1 && fusable(in) && in.Shape.Size() == size
		}
		var (
			prog   fusedProgram
			inputs []*gobackend.Node
			stepOf = map[*gobackend.Node]int{}
		)
		var visit func(node *gobackend.Node) int
		visit = func(node *gobackend.Node) int {
			if s, ok := stepOf[node]; ok {
				return s
			}
			st := fusedStep{op: node.OpType, args: make([]fusedArg, len(node.Inputs)), unary: fusedUnaryKernels[node.OpType],
				bin: fusedBinaryKernels(node.OpType), commutative: fusedBinaryCommutative[node.OpType]}
			for i, in := range node.Inputs {
				if inner(in) {
					st.args[i] = fusedArg{input: -1, step: visit(in)}
					continue
				}
				pos := -1
				for j, x := range inputs {
					if x == in {
						pos = j
					}
				}
				if pos < 0 {
					pos = len(inputs)
					inputs = append(inputs, in)
				}
				st.args[i] = fusedArg{input: pos}
			}
			stepOf[node] = len(prog.steps)
			prog.steps = append(prog.steps, st)
			return stepOf[node]
		}
		visit(root)
		if len(prog.steps) < 2 || len(prog.steps) > fusedMaxSteps {
			continue // a tree too large for the scratch: its subtrees are fused as they come
		}
		for node := range stepOf {
			if node != root {
				absorbed[node.Index] = true
			}
		}
		root.OpType = compute.OpTypeFusedElementwise
		root.Inputs = inputs
		root.Data = &prog
	}
}

func seenBefore(nodes []*gobackend.Node, i int) bool {
	for _, x := range nodes[:i] {
		if x == nodes[i] {
			return true
		}
	}
	return false
}

// fusable reports whether node is a float32 elementwise op a tree may hold: a unary op of
// fusedUnaryKernels, a binary op of runsBinary or Where, whose operands each have the node's
// number of elements or one element (a scalar, broadcast).
func fusable(node *gobackend.Node) bool {
	if node.IsMultiOutputs() || node.IsNodeSelectOutput || node.Shape.DType != dtypes.Float32 ||
		node.Shape.IsDynamic() || node.Shape.Size() < fusedMinElements || len(node.CapturedInputs) > 0 {
		return false
	}
	size := node.Shape.Size()
	operand := func(in *gobackend.Node, dtype dtypes.DType) bool {
		return in.Shape.DType == dtype && !in.Shape.IsDynamic() && !in.IsMultiOutputs() &&
			(in.Shape.Size() == size || in.Shape.Size() == 1)
	}
	switch _, binary := fusedBinaryCommutative[node.OpType]; {
	case fusedUnaryKernels[node.OpType] != nil:
		return len(node.Inputs) == 1 && node.Inputs[0].Shape.Size() == size && operand(node.Inputs[0], dtypes.Float32)
	case binary:
		return len(node.Inputs) == 2 && operand(node.Inputs[0], dtypes.Float32) && operand(node.Inputs[1], dtypes.Float32)
	case node.OpType == compute.OpTypeWhere:
		return len(node.Inputs) == 3 && operand(node.Inputs[0], dtypes.Bool) &&
			operand(node.Inputs[1], dtypes.Float32) && operand(node.Inputs[2], dtypes.Float32)
	}
	return false
}

// fusedScratchBuf is a range's scratch: a chunk per step, and the steps' current chunks.
type fusedScratchBuf struct {
	buf  []float32
	vals [][]float32
}

var fusedScratch = sync.Pool{New: func() any { return new([]float32) }} // the GLU and RMS norm kernels' scratch

// fusedElementwiseScratch holds execFusedElementwise's fusedScratchBufs.
var fusedElementwiseScratch = sync.Pool{New: func() any { return new(fusedScratchBuf) }}

// execFusedElementwise runs a fused tree over its output in chunks, split across the backend's
// workers for large tensors like the other elementwise ops. The output reuses an input the
// executor owns when it has the output's shape: the root, the last step of each chunk, writes the
// chunk only after every step has read it.
func execFusedElementwise(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, inputsOwned []bool) (*gobackend.Buffer, error) {
	prog := node.Data.(*fusedProgram)
	var output *gobackend.Buffer
	for i, in := range inputs {
		if inputsOwned[i] && in.RawShape.Equal(node.Shape) {
			output = in
			break
		}
	}
	flats := make([]any, len(inputs))
	for i, in := range inputs {
		flats[i] = in.Flat
	}
	if output == nil {
		var err error
		if output, err = backend.GetBuffer(node.Shape); err != nil {
			return nil, err
		}
	} else {
		for i := range inputs {
			if inputs[i] == output {
				inputs[i] = nil // the executor's contract for a reused input
			}
		}
	}
	out := output.Flat.([]float32)
	run := func(lo, hi int) {
		scratch := fusedElementwiseScratch.Get().(*fusedScratchBuf)
		defer fusedElementwiseScratch.Put(scratch)
		if need := len(prog.steps) * fusedChunk; len(scratch.buf) < need {
			scratch.buf = make([]float32, need)
		}
		if len(scratch.vals) < len(prog.steps) {
			scratch.vals = make([][]float32, len(prog.steps))
		}
		for c := lo; c < hi; c += fusedChunk {
			runFusedChunk(prog, flats, out, scratch.buf, scratch.vals, c, min(c+fusedChunk, hi))
		}
		clear(scratch.vals) // the pool keeps no reference to the output
	}
	n := len(out)
	if n < parallelMinElements || !workerspool.ParallelOps {
		run(0, n)
	} else {
		parallelFor(backend, n, parallelMinElements/4, fusedChunk, run)
	}
	return output, nil
}

// runFusedChunk computes elements [lo, hi) of every step, the root's into out.
func runFusedChunk(prog *fusedProgram, flats []any, out, scratch []float32, vals [][]float32, lo, hi int) {
	c := hi - lo
	last := len(prog.steps) - 1
	for s := range prog.steps {
		st := &prog.steps[s]
		dst := scratch[s*fusedChunk : s*fusedChunk+c]
		if s == last {
			dst = out[lo:hi]
		}
		switch {
		case st.unary != nil:
			st.unary(fusedOperand(st.args[0], flats, vals, lo, hi), dst)
		case st.op == compute.OpTypeWhere:
			cond := flats[st.args[0].input].([]bool) // a bool operand is never a step
			if len(cond) > 1 {
				cond = cond[lo:hi]
			}
			fusedWhere(cond, fusedOperand(st.args[1], flats, vals, lo, hi), fusedOperand(st.args[2], flats, vals, lo, hi), dst)
		default:
			l, r := fusedOperand(st.args[0], flats, vals, lo, hi), fusedOperand(st.args[1], flats, vals, lo, hi)
			if st.commutative && len(l) == 1 && len(r) != 1 { // as runsExecutor swaps
				l, r = r, l
			}
			if st.bin == nil {
				ls, rs := shapes.Make(dtypes.Float32, len(l)), shapes.Make(dtypes.Float32, len(r))
				runsBinary(st.op, l, r, dst, ls, rs, shapes.Make(dtypes.Float32, c))
				break
			}
			switch { // binaryWithKernels' cases for whole chunks and scalars
			case len(r) == 1 && len(l) == c:
				st.bin.vs(dst, l, r[0])
			case len(l) == 1 && len(r) == c:
				st.bin.sv(dst, l[0], r)
			default:
				st.bin.vv(dst, l, r)
			}
		}
		// The vector kernels leave the upper register halves dirty, which slows the scalar SSE
		// loops after them (Sqrt, Log...) several-fold: the executor clears them after every op,
		// and so does every step here.
		simdstate.ClearUpper()
		vals[s] = dst
	}
}

// fusedOperand is a float32 operand's elements [lo, hi): a step's chunk, an input's range, or an
// input's single element (a scalar, broadcast).
func fusedOperand(a fusedArg, flats []any, vals [][]float32, lo, hi int) []float32 {
	if a.input < 0 {
		return vals[a.step]
	}
	x := flats[a.input].([]float32)
	if len(x) == 1 {
		return x
	}
	return x[lo:hi]
}

// fusedWhere is Where for float32: cond, t and e each of len(dst) elements or one (broadcast).
func fusedWhere(cond []bool, t, e, dst []float32) {
	if len(cond) == 1 {
		src := e
		if cond[0] {
			src = t
		}
		if len(src) == 1 {
			for i := range dst {
				dst[i] = src[0]
			}
		} else {
			copy(dst, src)
		}
		return
	}
	for i := range dst {
		var x float32
		if cond[i] {
			x = t[0]
			if len(t) > 1 {
				x = t[i]
			}
		} else {
			x = e[0]
			if len(e) > 1 {
				x = e[i]
			}
		}
		dst[i] = x
	}
}
