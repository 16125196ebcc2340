// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"unsafe"

	"github.com/gomlx/compute/internal/gobackend"
)

// transposePlan is a transpose reduced to its essential axes: size-1 axes dropped and operand
// axes that stay adjacent and in order in the output merged. dims are the operand's collapsed
// dimensions and perm maps output axis → operand axis, as Transpose's permutations do.
type transposePlan struct {
	dims []int
	perm []int
}

// planTranspose collapses (dims, perm). The result has the same element order in the output.
func planTranspose(dims []int, perm []int) transposePlan {
	// Drop size-1 axes (they never move any data).
	keep := make([]int, 0, len(dims)) // operand axes kept, in operand order
	newIdx := make([]int, len(dims))
	for axis, d := range dims {
		if d == 1 {
			newIdx[axis] = -1
			continue
		}
		newIdx[axis] = len(keep)
		keep = append(keep, axis)
	}
	p := make([]int, 0, len(keep))
	for _, a := range perm {
		if newIdx[a] >= 0 {
			p = append(p, newIdx[a])
		}
	}
	d := make([]int, len(keep))
	for i, a := range keep {
		d[i] = dims[a]
	}
	// Merge operand axes a, a+1 that appear consecutively in the output.
	for {
		merged := false
		for i := 0; i+1 < len(p); i++ {
			if p[i+1] != p[i]+1 {
				continue
			}
			a := p[i]
			d[a] *= d[a+1]
			d = append(d[:a+1], d[a+2:]...)
			p = append(p[:i+1], p[i+2:]...)
			for j := range p {
				if p[j] > a {
					p[j]--
				}
			}
			merged = true
			break
		}
		if !merged {
			break
		}
	}
	return transposePlan{dims: d, perm: p}
}

// fastTranspose transposes operand into output for any element of size 1, 2, 4 or 8 bytes,
// moving contiguous runs with copy and the rest with a cache-blocked 2-D kernel. It returns false
// for element sizes it does not handle (the caller falls back to the generic iterator).
func fastTranspose(operand, output *gobackend.Buffer, perm []int) bool {
	return fastTransposeOn(nil, operand, output, perm)
}

// fastTransposeOn is fastTranspose with large transposes split across the backend's workers.
func fastTransposeOn(backend *gobackend.Backend, operand, output *gobackend.Buffer, perm []int) bool {
	plan := planTranspose(operand.RawShape.Dimensions, perm)
	size := operand.RawShape.Size()
	elem := int(operand.RawShape.DType.Size())
	if size == 0 {
		return true
	}
	src := operand.RawBytes[:size*elem]
	dst := output.RawBytes[:size*elem]
	switch elem {
	case 1:
		transposeTypedOn(backend, unsafe.Slice((*uint8)(unsafe.Pointer(&src[0])), size), unsafe.Slice((*uint8)(unsafe.Pointer(&dst[0])), size), plan, nil)
	case 2:
		transposeTypedOn(backend, unsafe.Slice((*uint16)(unsafe.Pointer(&src[0])), size), unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), size), plan, nil)
	case 4:
		transposeTypedOn(backend, unsafe.Slice((*uint32)(unsafe.Pointer(&src[0])), size), unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), size), plan, block8x8x32)
	case 8:
		transposeTypedOn(backend, unsafe.Slice((*uint64)(unsafe.Pointer(&src[0])), size), unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), size), plan, nil)
	default:
		return false
	}
	return true
}

// block8x8x32, where the CPU has one, transposes an 8×8 block of 4-byte elements: dst row r (at
// dst + r·dstStride bytes) gets element r of the 8 source rows (at src + c·srcStride). nil: the
// scalar block.
var block8x8x32 func(src unsafe.Pointer, srcStride uintptr, dst unsafe.Pointer, dstStride uintptr)

// transposeTyped moves src into dst by plan; kern8, for 4-byte T, is block8x8x32 (or nil).
func transposeTyped[T any](src, dst []T, plan transposePlan, kern8 func(src unsafe.Pointer, srcStride uintptr, dst unsafe.Pointer, dstStride uintptr)) {
	transposeTypedOn(nil, src, dst, plan, kern8)
}

// transposeTypedOn is transposeTyped with its units of work (contiguous runs, or 16-column strips
// of the tiled case) split across the backend's workers when the transpose is large (Temper fork:
// parallel.go); backend nil runs them all on the caller. Each unit moves its own part of dst.
func transposeTypedOn[T any](backend *gobackend.Backend, src, dst []T, plan transposePlan, kern8 func(src unsafe.Pointer, srcStride uintptr, dst unsafe.Pointer, dstStride uintptr)) {
	rank := len(plan.dims)
	if rank <= 1 {
		copy(dst, src)
		return
	}
	// Operand strides of the collapsed axes.
	strides := make([]int, rank)
	s := 1
	for a := rank - 1; a >= 0; a-- {
		strides[a] = s
		s *= plan.dims[a]
	}
	grainUnits := func(unitElems int) int { return max(1, parallelMinElements/4/max(unitElems, 1)) }
	last := plan.perm[rank-1] // operand axis that is innermost in the output
	if last == rank-1 {
		// The innermost axis keeps its place: move runs of dims[last] elements, one per unit.
		run := plan.dims[last]
		outer := plan.perm[:rank-1]
		units := len(src) / run
		move := func(lo, hi int) {
			forEachIndexRange(plan.dims, outer, strides, func(dstOff, srcOff int) {
				copy(dst[dstOff:dstOff+run], src[srcOff:srcOff+run])
			}, run, lo, hi)
		}
		if backend == nil || len(src) < parallelMinElements {
			move(0, units)
			return
		}
		parallelFor(backend, units, grainUnits(run), 1, move)
		return
	}
	// The output's innermost axis is operand axis `last` (stride strides[last] in src), and the
	// operand's innermost axis rank-1 lands somewhere in the output's outer axes: transpose
	// [rows = dims[rank-1]] × [cols = dims[last]] tiles for every index of the other axes.
	rows, cols := plan.dims[rank-1], plan.dims[last]
	// Output strides per operand axis.
	outStrides := make([]int, rank)
	os := 1
	for i := rank - 1; i >= 0; i-- {
		outStrides[plan.perm[i]] = os
		os *= plan.dims[plan.perm[i]]
	}
	srcColStride := strides[last]      // moving along the output's inner axis in src
	dstRowStride := outStrides[rank-1] // moving along the operand's inner axis in dst
	others := make([]int, 0, rank-2)
	for _, a := range plan.perm {
		if a != last && a != rank-1 {
			others = append(others, a)
		}
	}
	// 16×16 blocks through a local buffer: every source row segment and every destination row
	// segment is read or written whole (a cache line of float32), so power-of-two strides cannot
	// thrash the cache the way a column walk does. A unit is one 16-column strip (all rows) of one
	// index of the other axes.
	const tile = 16
	strips := (cols + tile - 1) / tile
	units := strips
	for _, a := range others {
		units *= plan.dims[a]
	}
	move := func(lo, hi int) {
		var block [tile * tile]T
		for u := lo; u < hi; u++ {
			// Index of the other axes (row-major over the output order) and the strip.
			srcBase, dstBase := 0, 0
			rest := u / strips
			for i := len(others) - 1; i >= 0; i-- {
				a := others[i]
				idx := rest % plan.dims[a]
				rest /= plan.dims[a]
				srcBase += idx * strides[a]
				dstBase += idx * outStrides[a]
			}
			c0 := u % strips * tile
			cn := min(tile, cols-c0)
			for r0 := 0; r0 < rows; r0 += tile {
				rn := min(tile, rows-r0)
				if kern8 != nil && cn == tile && rn == tile {
					// Full blocks: the whole 16×16 lies inside both slices (checked once here).
					so := srcBase + c0*srcColStride + r0
					do := dstBase + r0*dstRowStride + c0
					_ = src[so+(tile-1)*srcColStride+tile-1]
					_ = dst[do+(tile-1)*dstRowStride+tile-1]
					var zero T
					es := unsafe.Sizeof(zero)
					ss, ds := uintptr(srcColStride)*es, uintptr(dstRowStride)*es
					for _, b := range [4][2]int{{0, 0}, {0, 8}, {8, 0}, {8, 8}} { // {c, r} of each 8×8
						kern8(unsafe.Pointer(&src[so+b[0]*srcColStride+b[1]]), ss,
							unsafe.Pointer(&dst[do+b[1]*dstRowStride+b[0]]), ds)
					}
					continue
				}
				// Read cn source runs of rn elements: src[c][r0:r0+rn].
				for c := range cn {
					so := srcBase + (c0+c)*srcColStride + r0
					seg := src[so : so+rn]
					for r, v := range seg {
						block[r*tile+c] = v
					}
				}
				// Write rn destination runs of cn elements: dst[r][c0:c0+cn].
				for r := range rn {
					do := dstBase + (r0+r)*dstRowStride + c0
					copy(dst[do:do+cn], block[r*tile:r*tile+cn])
				}
			}
		}
	}
	if backend == nil || len(src) < parallelMinElements {
		move(0, units)
		return
	}
	parallelFor(backend, units, grainUnits(tile*rows), 1, move)
}

// forEachIndex walks the output positions of the axes in outer (output order, operand axes) and
// calls fn with the output offset (step run) and the operand offset of each.
func forEachIndex(dims, outer, strides []int, fn func(dstOff, srcOff int), run int) {
	n := 1
	for _, a := range outer {
		n *= dims[a]
	}
	forEachIndexRange(dims, outer, strides, fn, run, 0, n)
}

// forEachIndexRange is forEachIndex over the positions [lo, hi) of that walk.
func forEachIndexRange(dims, outer, strides []int, fn func(dstOff, srcOff int), run, lo, hi int) {
	n := len(outer)
	idx := make([]int, n)
	rest := lo
	for i := n - 1; i >= 0; i-- {
		idx[i] = rest % dims[outer[i]]
		rest /= dims[outer[i]]
	}
	dstOff := lo * run
	for pos := lo; pos < hi; pos++ {
		srcOff := 0
		for i, a := range outer {
			srcOff += idx[i] * strides[a]
		}
		fn(dstOff, srcOff)
		dstOff += run
		for i := n - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < dims[outer[i]] {
				break
			}
			idx[i] = 0
		}
	}
}

// fastSlice copies a unit-stride slice as contiguous runs (the innermost axes the slice keeps
// whole are merged into one run). It returns false for strided slices or element sizes it does
// not handle.
func fastSlice(operand, output *gobackend.Buffer, starts, strides []int) bool {
	for _, s := range strides {
		if s != 1 {
			return false
		}
	}
	elem := operand.RawShape.DType.Size()
	if elem < 1 {
		return false
	}
	inDims, outDims := operand.RawShape.Dimensions, output.RawShape.Dimensions
	rank := len(inDims)
	if rank == 0 {
		return false
	}
	// Run: the innermost axes kept whole, times the first partial axis from the inside.
	run := 1
	axis := rank - 1
	for axis >= 0 && outDims[axis] == inDims[axis] {
		run *= inDims[axis]
		axis--
	}
	inStrides := make([]int, rank)
	s := 1
	for a := rank - 1; a >= 0; a-- {
		inStrides[a] = s
		s *= inDims[a]
	}
	base := 0
	for a := range rank {
		base += starts[a] * inStrides[a]
	}
	if axis < 0 { // whole operand
		copy(output.RawBytes[:run*elem], operand.RawBytes[base*elem:(base+run)*elem])
		return true
	}
	run *= outDims[axis] // the partial axis' elements are contiguous too
	outer := outDims[:axis]
	idx := make([]int, len(outer))
	src, dst := operand.RawBytes, output.RawBytes
	runBytes := run * elem
	total := output.RawShape.Size() * elem
	for o := 0; o < total; o += runBytes {
		off := base
		for i := range outer {
			off += idx[i] * inStrides[i]
		}
		copy(dst[o:o+runBytes], src[off*elem:off*elem+runBytes])
		for i := len(outer) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < outer[i] {
				break
			}
			idx[i] = 0
		}
	}
	return true
}
