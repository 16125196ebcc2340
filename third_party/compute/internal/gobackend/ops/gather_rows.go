// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"slices"

	"github.com/gomlx/compute/internal/gobackend"
)

// gatherRows is Gather when it picks whole leading-axis slices ("rows") of the operand: an embedding
// lookup. The indices hold one start index per row on their last axis (size 1), the leading axis is
// collapsed, the slices span every other axis whole, and the output's trailing axes are those of the
// row. Each row is one copy; indices are clamped to [0, rows-1] as the generic loop clamps them. It
// reports false (and writes nothing) where it does not apply.
func gatherRows(p *gatherNode, operand, indices, output *gobackend.Buffer, operandBytes, outputBytes []byte) bool {
	oShape, iShape := operand.RawShape, indices.RawShape
	rank, iRank := oShape.Rank(), iShape.Rank()
	if rank < 1 || iRank < 1 || p.indexVectorAxis != iRank-1 || iShape.Dimensions[iRank-1] != 1 ||
		!slices.Equal(p.startIndexMap, []int{0}) || !slices.Equal(p.collapsedSlicesAxes, []int{0}) ||
		len(p.sliceSizes) != rank || p.sliceSizes[0] != 1 || len(p.offsetOutputAxes) != rank-1 {
		return false
	}
	outRank := output.RawShape.Rank()
	for i, a := range p.offsetOutputAxes {
		if a != outRank-(rank-1)+i || p.sliceSizes[i+1] != oShape.Dimensions[i+1] {
			return false
		}
	}
	rowBytes := oShape.DType.Size()
	for _, d := range oShape.Dimensions[1:] {
		rowBytes *= d
	}
	n := iShape.Size()
	numRows := oShape.Dimensions[0]
	if numRows == 0 || n*rowBytes != len(outputBytes) {
		return false
	}
	row := func(idx int) []byte {
		idx = min(max(idx, 0), numRows-1)
		return operandBytes[idx*rowBytes : (idx+1)*rowBytes]
	}
	switch flat := indices.Flat.(type) {
	case []int32:
		for i, idx := range flat {
			copy(outputBytes[i*rowBytes:(i+1)*rowBytes], row(int(idx)))
		}
	case []int64:
		for i, idx := range flat {
			copy(outputBytes[i*rowBytes:(i+1)*rowBytes], row(int(idx)))
		}
	default:
		return false
	}
	return true
}
