// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
)

// reduceRuns reduces operand (dims, with reduced[axis] marking the reduced axes) into out, which
// must hold the reduction's initial value. It visits the operand in flat order, so each output
// accumulates its inputs in exactly the order of the reference iterator (results are
// bit-identical), but it works on contiguous runs: a kept innermost axis is combined row into
// row (vec), a reduced innermost axis is folded into one output (fold).
func reduceRuns[T gobackend.PODNumericConstraints](operand, out []T, dims []int, reduced []bool,
	vec func(acc, in []T), fold func(acc T, in []T) T) {
	// Collapse adjacent axes of the same kind; drop size-1 axes.
	var gDims []int
	var gRed []bool
	for axis, d := range dims {
		if d == 1 {
			continue
		}
		if n := len(gDims); n > 0 && gRed[n-1] == reduced[axis] {
			gDims[n-1] *= d
			continue
		}
		gDims = append(gDims, d)
		gRed = append(gRed, reduced[axis])
	}
	if len(gDims) == 0 {
		if len(operand) > 0 {
			out[0] = fold(out[0], operand[:1])
		}
		return
	}
	n := len(gDims)
	// Output stride of each group (0 for reduced groups).
	outStrides := make([]int, n)
	s := 1
	for g := n - 1; g >= 0; g-- {
		if gRed[g] {
			continue
		}
		outStrides[g] = s
		s *= gDims[g]
	}
	run := gDims[n-1]
	innerReduced := gRed[n-1]
	outer := n - 1
	idx := make([]int, outer)
	outOff := 0
	for inOff := 0; inOff < len(operand); inOff += run {
		in := operand[inOff : inOff+run]
		if innerReduced {
			out[outOff] = fold(out[outOff], in)
		} else {
			vec(out[outOff:outOff+run], in)
		}
		for g := outer - 1; g >= 0; g-- {
			idx[g]++
			outOff += outStrides[g]
			if idx[g] < gDims[g] {
				break
			}
			outOff -= outStrides[g] * gDims[g]
			idx[g] = 0
		}
	}
}

func reduceSumRuns[T gobackend.PODNumericConstraints](operand, out []T, dims []int, reduced []bool) {
	reduceRuns(operand, out, dims, reduced,
		func(acc, in []T) {
			in = in[:len(acc)]
			for i := range acc {
				acc[i] += in[i]
			}
		},
		func(acc T, in []T) T {
			for _, v := range in {
				acc += v
			}
			return acc
		})
}

func reduceMaxRuns[T gobackend.PODNumericConstraints](operand, out []T, dims []int, reduced []bool) {
	reduceRuns(operand, out, dims, reduced,
		func(acc, in []T) {
			in = in[:len(acc)]
			for i := range acc {
				acc[i] = max(acc[i], in[i])
			}
		},
		func(acc T, in []T) T {
			for _, v := range in {
				acc = max(acc, v)
			}
			return acc
		})
}

func reduceMinRuns[T gobackend.PODNumericConstraints](operand, out []T, dims []int, reduced []bool) {
	reduceRuns(operand, out, dims, reduced,
		func(acc, in []T) {
			in = in[:len(acc)]
			for i := range acc {
				acc[i] = min(acc[i], in[i])
			}
		},
		func(acc T, in []T) T {
			for _, v := range in {
				acc = min(acc, v)
			}
			return acc
		})
}

// reducedMask marks the reduced axes of a rank-`rank` operand.
func reducedMask(rank int, axes []int) []bool {
	m := make([]bool, rank)
	for _, a := range axes {
		m[a] = true
	}
	return m
}

// fastReduceFloat32 runs ReduceSum/Max/Min of float32 by runs; false for other ops.
func fastReduceFloat32(op compute.OpType, operand, output *gobackend.Buffer, axes []int) bool {
	return fastReduceFloat32On(nil, op, operand, output, axes)
}

// fastReduceFloat32On is fastReduceFloat32 with a large operand whose leading axes are kept split
// by those axes across the backend's workers (parallel.go): each output is still reduced from its
// own inputs in the same order.
func fastReduceFloat32On(backend *gobackend.Backend, op compute.OpType, operand, output *gobackend.Buffer, axes []int) bool {
	in, out := operand.Flat.([]float32)[:operand.RawShape.Size()], output.Flat.([]float32)[:output.RawShape.Size()]
	dims := operand.RawShape.Dimensions
	mask := reducedMask(len(dims), axes)
	var runs func(operand, out []float32, dims []int, reduced []bool)
	switch op { //nolint:exhaustive
	case compute.OpTypeReduceSum:
		clear(out)
		runs = reduceSumRuns[float32]
	case compute.OpTypeReduceMax:
		lowest := dtypes.Float32.LowestValue().(float32)
		for i := range out {
			out[i] = lowest
		}
		runs = reduceMaxRuns[float32]
	case compute.OpTypeReduceMin:
		highest := dtypes.Float32.HighestValue().(float32)
		for i := range out {
			out[i] = highest
		}
		runs = reduceMinRuns[float32]
	default:
		return false
	}
	// Kept leading axes: rows of the operand, each reduced into its own rows of the output.
	k, lead := 0, 1
	for k < len(dims) && !mask[k] {
		lead *= dims[k]
		k++
	}
	if backend == nil || len(in) < parallelMinElements || lead < 2 || len(out) == 0 {
		runs(in, out, dims, mask)
		return true
	}
	inRow, outRow := len(in)/lead, len(out)/lead
	// Each range is the operand as [rows, the remaining axes...].
	subMask := append([]bool{false}, mask[k:]...)
	backend.Workers.ParallelFor(lead, max(1, parallelMinElements/4/max(inRow, 1)), 1, func(lo, hi int) {
		d := append([]int{hi - lo}, dims[k:]...)
		runs(in[lo*inRow:hi*inRow], out[lo*outRow:hi*outRow], d, subMask)
	})
	return true
}
