// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// The run kernels of binary_strided.go are wired in here, not in gen_exec_binary.go: that file is
// the generator's output and stays exactly as upstream's generator writes it, so `go generate`
// cannot undo the fork. PriorityTyped outranks the generated PriorityGeneric executors whatever
// the init order. Upstream, the same change belongs in the gobackend_ops_generator template.
func init() {
	for _, o := range runsOps {
		gobackend.SetNodeExecutor(o.op, gobackend.PriorityTyped, runsExecutor(o.op, o.commutative, o.generated))
	}
}

// runsOps are the ops with run kernels; commutative is the generator's IsCommutative.
var runsOps = []struct {
	op          compute.OpType
	commutative bool
	generated   gobackend.NodeExecutor
}{
	{compute.OpTypeAdd, true, execAdd},
	{compute.OpTypeMul, true, execMul},
	{compute.OpTypeSub, false, execSub},
	{compute.OpTypeDiv, false, execDiv},
	{compute.OpTypeMax, true, execMax},
	{compute.OpTypeMin, true, execMin},
}

// runsExecutor executes op for the integer and float32/float64 dtypes through the run kernels;
// every other dtype (half precision, and the unsupported ones with their error) goes to the
// generated executor untouched. commutative must match the generator's IsCommutative: the
// operands are swapped exactly as the generated executor swaps them.
func runsExecutor(op compute.OpType, commutative bool, generated gobackend.NodeExecutor) gobackend.NodeExecutor {
	return func(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, inputsOwned []bool) (*gobackend.Buffer, error) {
		switch inputs[0].RawShape.DType { //nolint:exhaustive
		case dtypes.Uint8, dtypes.Uint16, dtypes.Uint32, dtypes.Uint64,
			dtypes.Int8, dtypes.Int16, dtypes.Int32, dtypes.Int64,
			dtypes.Float32, dtypes.Float64:
		default:
			return generated(backend, node, inputs, inputsOwned)
		}
		lhs, rhs, output, lhsIsScalarOr1, rhsIsScalarOr1 := binaryOperandsAndOutputForExecution(backend, node, inputs, inputsOwned, node.Shape)
		if commutative && lhsIsScalarOr1 && !rhsIsScalarOr1 {
			lhs, rhs = rhs, lhs
		}
		l, r, o := lhs.RawShape, rhs.RawShape, output.RawShape
		switch lhs.RawShape.DType { //nolint:exhaustive
		case dtypes.Uint8:
			runsBinary(op, lhs.Flat.([]uint8), rhs.Flat.([]uint8), output.Flat.([]uint8), l, r, o)
		case dtypes.Uint16:
			runsBinary(op, lhs.Flat.([]uint16), rhs.Flat.([]uint16), output.Flat.([]uint16), l, r, o)
		case dtypes.Uint32:
			runsBinary(op, lhs.Flat.([]uint32), rhs.Flat.([]uint32), output.Flat.([]uint32), l, r, o)
		case dtypes.Uint64:
			runsBinary(op, lhs.Flat.([]uint64), rhs.Flat.([]uint64), output.Flat.([]uint64), l, r, o)
		case dtypes.Int8:
			runsBinary(op, lhs.Flat.([]int8), rhs.Flat.([]int8), output.Flat.([]int8), l, r, o)
		case dtypes.Int16:
			runsBinary(op, lhs.Flat.([]int16), rhs.Flat.([]int16), output.Flat.([]int16), l, r, o)
		case dtypes.Int32:
			runsBinary(op, lhs.Flat.([]int32), rhs.Flat.([]int32), output.Flat.([]int32), l, r, o)
		case dtypes.Int64:
			runsBinary(op, lhs.Flat.([]int64), rhs.Flat.([]int64), output.Flat.([]int64), l, r, o)
		case dtypes.Float32:
			parallelRunsBinary(backend, op, lhs.Flat.([]float32), rhs.Flat.([]float32), output.Flat.([]float32), l, r, o) // Temper fork: parallel.go
		case dtypes.Float64:
			runsBinary(op, lhs.Flat.([]float64), rhs.Flat.([]float64), output.Flat.([]float64), l, r, o)
		}
		return output, nil
	}
}

// runsBinary computes one binary op. Add, Sub, Mul and Div run every case through the run
// kernels (SIMD for float32 where available). Max and Min keep the generated loops for a scalar
// rhs (the executor has moved any scalar there) and equal shapes, and take runs only where the
// generated loop would broadcast element by element.
func runsBinary[T gobackend.PODNumericConstraints](op compute.OpType, lhs, rhs, output []T, lhsShape, rhsShape, outputShape shapes.Shape) {
	switch op { //nolint:exhaustive
	case compute.OpTypeAdd:
		binaryWithKernels(lhs, rhs, output, lhsShape, rhsShape, outputShape, kernelsFor[T](binaryAdd, addKernels[T]),
			func(a, b T) T { return a + b })
	case compute.OpTypeMul:
		binaryWithKernels(lhs, rhs, output, lhsShape, rhsShape, outputShape, kernelsFor[T](binaryMul, mulKernels[T]),
			func(a, b T) T { return a * b })
	case compute.OpTypeSub:
		binaryWithKernels(lhs, rhs, output, lhsShape, rhsShape, outputShape, kernelsFor[T](binarySub, subKernels[T]),
			func(a, b T) T { return a - b })
	case compute.OpTypeDiv:
		binaryWithKernels(lhs, rhs, output, lhsShape, rhsShape, outputShape, kernelsFor[T](binaryDiv, divKernels[T]),
			func(a, b T) T { return a / b })
	case compute.OpTypeMax:
		if len(rhs) == 1 || lhsShape.Equal(rhsShape) || !stridedBinary(lhs, rhs, output, lhsShape, rhsShape, outputShape, maxKernels[T]()) {
			execMaxNumericGeneric(lhs, rhs, output, lhsShape, rhsShape, outputShape)
		}
	case compute.OpTypeMin:
		if len(rhs) == 1 || lhsShape.Equal(rhsShape) || !stridedBinary(lhs, rhs, output, lhsShape, rhsShape, outputShape, minKernels[T]()) {
			execMinNumericGeneric(lhs, rhs, output, lhsShape, rhsShape, outputShape)
		}
	default:
		panic("runsBinary: no run kernels for " + op.String())
	}
}
