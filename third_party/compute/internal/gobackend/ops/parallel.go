// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/workerspool"
	"github.com/gomlx/compute/shapes"
)

// Intra-op parallelism for large elementwise ops, transposes, reductions and softmax. The
// sequential executor runs one op at a time and only matmuls used every core, so on a training
// step the other cores idled through a third of the step (the non-matmul ops). Each op split here
// writes disjoint parts of its output and computes every element exactly as the whole op does, so
// results are the same bits for any number of workers.

// parallelMinElements is the smallest output split: below it an op costs about as much as
// waking a worker (tens of microseconds).
const parallelMinElements = 1 << 16

// parallelFor is the backend's Workers.ParallelFor (one range on the caller without a pool).
func parallelFor(backend *gobackend.Backend, n, grain, align int, fn func(lo, hi int)) {
	if backend == nil || backend.Workers == nil {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	backend.Workers.ParallelFor(n, grain, align, fn)
}

// parallelRunsBinary is runsBinary for float32 split across workers: by flat ranges when the
// operands are equal-shaped or one is a scalar, else along the output's first axis (each operand
// sliced there unless it broadcasts along it).
func parallelRunsBinary(backend *gobackend.Backend, op compute.OpType, lhs, rhs, output []float32, l, r, o shapes.Shape) {
	n := o.Size()
	if n < parallelMinElements || !workerspool.ParallelOps {
		runsBinary(op, lhs, rhs, output, l, r, o)
		return
	}
	flat := func(m int) shapes.Shape { return shapes.Make(dtypes.Float32, m) }
	switch {
	case len(rhs) == 1 && len(lhs) == n, len(lhs) == 1 && len(rhs) == n, l.Equal(r):
		parallelFor(backend, n, parallelMinElements/4, 16, func(lo, hi int) {
			ls, rs, ln, rn := lhs, rhs, l, r
			if len(lhs) == n {
				ls, ln = lhs[lo:hi], flat(hi-lo)
			}
			if len(rhs) == n {
				rs, rn = rhs[lo:hi], flat(hi-lo)
			}
			runsBinary(op, ls, rs, output[lo:hi], ln, rn, flat(hi-lo))
		})
	case l.Rank() == o.Rank() && r.Rank() == o.Rank() && o.Rank() >= 2 && o.Dim(0) >= 8:
		rows := o.Dim(0)
		rowSize := n / rows
		grain := max(1, parallelMinElements/4/max(rowSize, 1))
		parallelFor(backend, rows, grain, 1, func(lo, hi int) {
			sub := func(x []float32, s shapes.Shape) ([]float32, shapes.Shape) {
				if s.Dim(0) == 1 {
					return x, s
				}
				size := len(x) / rows
				dims := append([]int{hi - lo}, s.Dimensions[1:]...)
				return x[lo*size : hi*size], shapes.Make(dtypes.Float32, dims...)
			}
			ls, ln := sub(lhs, l)
			rs, rn := sub(rhs, r)
			os, on := sub(output, o)
			runsBinary(op, ls, rs, os, ln, rn, on)
		})
	default:
		runsBinary(op, lhs, rhs, output, l, r, o)
	}
}

// parallelUnaryOps are the float32 unary kernels run split across workers; each computes every
// element independently of its position (the vectorised exp and logistic give the same bits in
// any position, see ../fastmath), so the split does not change results.
var parallelUnaryOps = []struct {
	op      compute.OpType
	kernel  func(in, out []float32)
	generic gobackend.NodeExecutor
}{
	{compute.OpTypeNeg, execNegGeneric[float32], execNeg},
	{compute.OpTypeAbs, execAbsGeneric[float32], execAbs},
	{compute.OpTypeExp, execExpFloat32, execExp},
	{compute.OpTypeLog, execLogGeneric[float32], execLog},
	{compute.OpTypeLogistic, execLogisticFloat32, execLogistic},
	{compute.OpTypeSqrt, execSqrtFloat32, execSqrt},
	{compute.OpTypeRsqrt, execRsqrtGeneric[float32], execRsqrt},
	{compute.OpTypeTanh, execTanhGeneric[float32], execTanh},
	{compute.OpTypeCos, execCosGeneric[float32], execCos},
	{compute.OpTypeSin, execSinGeneric[float32], execSin},
}

// PriorityTyped outranks the PriorityGeneric executors of unaryops.go whatever the init order.
func init() {
	for _, u := range parallelUnaryOps {
		gobackend.SetNodeExecutor(u.op, gobackend.PriorityTyped, parallelUnaryExecutor(u.kernel, u.generic))
	}
}

// parallelUnaryExecutor runs large float32 operands through kernel on several workers and
// everything else through the op's own executor.
func parallelUnaryExecutor(kernel func(in, out []float32), generic gobackend.NodeExecutor) gobackend.NodeExecutor {
	return func(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, inputsOwned []bool) (*gobackend.Buffer, error) {
		if inputs[0].RawShape.DType != dtypes.Float32 || inputs[0].RawShape.Size() < parallelMinElements || !workerspool.ParallelOps {
			return generic(backend, node, inputs, inputsOwned)
		}
		input, output, err := unaryOperandAndOutput(backend, inputs, inputsOwned)
		if err != nil {
			return nil, err
		}
		in, out := input.Flat.([]float32), output.Flat.([]float32)
		parallelFor(backend, len(in), parallelMinElements/4, 16, func(lo, hi int) {
			kernel(in[lo:hi], out[lo:hi])
		})
		return output, nil
	}
}
