// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
)

// scatterRunsFloat32 is the float32 scatter when every update window is one contiguous run of the
// output: index vectors on the last axis of the indices, window axes the trailing axes of both the
// updates and the operand, and windows that span the operand's inner axes whole. That is a
// KV-cache write (one column or one row per cache line), which the generic loop did through two
// index iterators per element. Points are combined in the generic loop's order, so results are the
// same bits; it reports false (and writes nothing) where it does not apply, including any index
// out of range, so that such scatters keep the generic loop's behaviour.
func scatterRunsFloat32(opType compute.OpType, output, indices, updates *gobackend.Buffer, p *scatterNode) bool {
	if output.RawShape.DType != dtypes.Float32 {
		return false
	}
	var combine func(out, upd []float32)
	switch opType { //nolint:exhaustive
	case compute.OpTypeScatterSum:
		combine = func(out, upd []float32) {
			for i, u := range upd {
				out[i] += u
			}
		}
	case compute.OpTypeScatterMax:
		combine = func(out, upd []float32) {
			for i, u := range upd {
				out[i] = combineForScatterMaxGeneric(out[i], u)
			}
		}
	case compute.OpTypeScatterMin:
		combine = func(out, upd []float32) {
			for i, u := range upd {
				out[i] = combineForScatterMinGeneric(out[i], u)
			}
		}
	default:
		return false
	}
	oShape, iShape, uShape := output.RawShape, indices.RawShape, updates.RawShape
	rank, iRank, uRank := oShape.Rank(), iShape.Rank(), uShape.Rank()
	w := len(p.updateWindowAxes)
	if iRank == 0 || p.indexVectorAxis != iRank-1 || len(p.insertedWindowAxes)+w != rank {
		return false
	}
	for i, a := range p.updateWindowAxes {
		if a != uRank-w+i {
			return false
		}
	}
	for i, a := range p.insertedWindowAxes {
		if a != i {
			return false
		}
	}
	// Window dims in the operand: 1 on inserted axes, the updates' window dims on the rest; all
	// but the outermost window axis must be whole for the window to be one run.
	winDim := make([]int, rank)
	for a := range rank - w {
		winDim[a] = 1
	}
	run := 1
	for i := range w {
		a := rank - w + i
		winDim[a] = uShape.Dimensions[uRank-w+i]
		if i > 0 && winDim[a] != oShape.Dimensions[a] {
			return false
		}
		run *= winDim[a]
	}
	vec := iShape.Dimensions[iRank-1]
	if vec != len(p.scatterAxesToOperandAxes) {
		return false
	}
	points := 1
	for _, d := range iShape.Dimensions[:iRank-1] {
		points *= d
	}
	if points*run != uShape.Size() {
		return false
	}
	strides := oShape.Strides()
	var offsets []int
	switch flat := indices.Flat.(type) {
	case []int32:
		offsets = scatterRunOffsets(flat, points, vec, p.scatterAxesToOperandAxes, oShape.Dimensions, winDim, strides)
	case []int64:
		offsets = scatterRunOffsets(flat, points, vec, p.scatterAxesToOperandAxes, oShape.Dimensions, winDim, strides)
	}
	if offsets == nil {
		return false
	}
	out, upd := output.Flat.([]float32), updates.Flat.([]float32)
	if run == 1 && opType == compute.OpTypeScatterSum {
		for pt, off := range offsets {
			out[off] += upd[pt]
		}
		return true
	}
	for pt, off := range offsets {
		combine(out[off:off+run], upd[pt*run:(pt+1)*run])
	}
	return true
}

// scatterRunOffsets returns each point's flat offset into the operand, or nil if an index is out
// of range (or the index type is not covered).
func scatterRunOffsets[I int32 | int64](flat []I, points, vec int, axes, dims, winDim, strides []int) []int {
	offsets := make([]int, points)
	if vec == 3 { // a K-cache column write: (row, head dim, slot) per point, unrolled
		a0, a1, a2 := axes[0], axes[1], axes[2]
		lim0, lim1, lim2 := dims[a0]-winDim[a0], dims[a1]-winDim[a1], dims[a2]-winDim[a2]
		s0, s1, s2 := strides[a0], strides[a1], strides[a2]
		if lim0 < 0 || lim1 < 0 || lim2 < 0 {
			return nil
		}
		flat = flat[:points*3]
		for pt := range points {
			v := flat[pt*3 : pt*3+3 : pt*3+3]
			v0, v1, v2 := int(v[0]), int(v[1]), int(v[2])
			if uint(v0) > uint(lim0) || uint(v1) > uint(lim1) || uint(v2) > uint(lim2) {
				return nil
			}
			offsets[pt] = v0*s0 + v1*s1 + v2*s2
		}
		return offsets
	}
	for pt := range points {
		off := 0
		for c, a := range axes {
			v := int(flat[pt*vec+c])
			if v < 0 || v > dims[a]-winDim[a] {
				return nil
			}
			off += v * strides[a]
		}
		offsets[pt] = off
	}
	return offsets
}
