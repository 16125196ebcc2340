// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// binaryKernels are one binary op's inner loops over a contiguous run: vv with both operands
// varying, vs with the rhs fixed, sv with the lhs fixed. Broadcasting calls them once per run
// instead of computing three flat indices per element.
type binaryKernels[T gobackend.PODNumericConstraints] struct {
	vv func(out, a, b []T)
	vs func(out, a []T, b T)
	sv func(out []T, a T, b []T)
}

// stridedBinary runs a broadcasting binary op as a loop over runs. It returns false (nothing
// written) when the shapes are not the same-rank, size-1-broadcast form it handles.
func stridedBinary[T gobackend.PODNumericConstraints](lhs, rhs, out []T, lhsShape, rhsShape, outShape shapes.Shape, k binaryKernels[T]) bool {
	rank := outShape.Rank()
	if lhsShape.Rank() != rank || rhsShape.Rank() != rank || rank == 0 {
		return false
	}
	// Per-axis strides of each operand over the output's axes (0 on broadcast axes).
	dims := make([]int, 0, rank)
	ls := make([]int, 0, rank)
	rs := make([]int, 0, rank)
	lStride, rStride := 1, 1
	for axis := rank - 1; axis >= 0; axis-- {
		d := outShape.Dimensions[axis]
		ld, rd := lhsShape.Dimensions[axis], rhsShape.Dimensions[axis]
		if (ld != d && ld != 1) || (rd != d && rd != 1) {
			return false
		}
		if d == 1 {
			continue
		}
		l, r := 0, 0
		if ld == d {
			l = lStride
			lStride *= d
		}
		if rd == d {
			r = rStride
			rStride *= d
		}
		// Merge with the axis just inside it when both operands stay contiguous across them.
		if n := len(dims); n > 0 && l == ls[n-1]*dims[n-1] && r == rs[n-1]*dims[n-1] {
			dims[n-1] *= d
			continue
		}
		dims = append(dims, d)
		ls = append(ls, l)
		rs = append(rs, r)
	}
	if len(dims) == 0 { // every axis is 1
		k.vv(out[:1], lhs[:1], rhs[:1])
		return true
	}
	// dims, ls, rs are innermost first now.
	run := dims[0]
	lInner, rInner := ls[0], rs[0]
	if lInner == 0 && rInner == 0 {
		return false
	}
	outer := dims[1:]
	idx := make([]int, len(outer))
	lOff, rOff := 0, 0
	for o := 0; o < len(out); o += run {
		dst := out[o : o+run]
		switch {
		case lInner != 0 && rInner != 0:
			k.vv(dst, lhs[lOff:lOff+run], rhs[rOff:rOff+run])
		case lInner != 0:
			k.vs(dst, lhs[lOff:lOff+run], rhs[rOff])
		default:
			k.sv(dst, lhs[lOff], rhs[rOff:rOff+run])
		}
		for i := range outer {
			idx[i]++
			lOff += ls[i+1]
			rOff += rs[i+1]
			if idx[i] < outer[i] {
				break
			}
			lOff -= ls[i+1] * outer[i]
			rOff -= rs[i+1] * outer[i]
			idx[i] = 0
		}
	}
	return true
}

func addKernels[T gobackend.PODNumericConstraints]() binaryKernels[T] {
	return binaryKernels[T]{
		vv: func(out, a, b []T) {
			a, b = a[:len(out)], b[:len(out)]
			for i := range out {
				out[i] = a[i] + b[i]
			}
		},
		vs: func(out, a []T, b T) {
			a = a[:len(out)]
			for i := range out {
				out[i] = a[i] + b
			}
		},
		sv: func(out []T, a T, b []T) {
			b = b[:len(out)]
			for i := range out {
				out[i] = a + b[i]
			}
		},
	}
}

func subKernels[T gobackend.PODNumericConstraints]() binaryKernels[T] {
	return binaryKernels[T]{
		vv: func(out, a, b []T) {
			a, b = a[:len(out)], b[:len(out)]
			for i := range out {
				out[i] = a[i] - b[i]
			}
		},
		vs: func(out, a []T, b T) {
			a = a[:len(out)]
			for i := range out {
				out[i] = a[i] - b
			}
		},
		sv: func(out []T, a T, b []T) {
			b = b[:len(out)]
			for i := range out {
				out[i] = a - b[i]
			}
		},
	}
}

func mulKernels[T gobackend.PODNumericConstraints]() binaryKernels[T] {
	return binaryKernels[T]{
		vv: func(out, a, b []T) {
			a, b = a[:len(out)], b[:len(out)]
			for i := range out {
				out[i] = a[i] * b[i]
			}
		},
		vs: func(out, a []T, b T) {
			a = a[:len(out)]
			for i := range out {
				out[i] = a[i] * b
			}
		},
		sv: func(out []T, a T, b []T) {
			b = b[:len(out)]
			for i := range out {
				out[i] = a * b[i]
			}
		},
	}
}

func divKernels[T gobackend.PODNumericConstraints]() binaryKernels[T] {
	return binaryKernels[T]{
		vv: func(out, a, b []T) {
			a, b = a[:len(out)], b[:len(out)]
			for i := range out {
				out[i] = a[i] / b[i]
			}
		},
		vs: func(out, a []T, b T) {
			a = a[:len(out)]
			for i := range out {
				out[i] = a[i] / b
			}
		},
		sv: func(out []T, a T, b []T) {
			b = b[:len(out)]
			for i := range out {
				out[i] = a / b[i]
			}
		},
	}
}

func maxKernels[T gobackend.PODNumericConstraints]() binaryKernels[T] {
	return binaryKernels[T]{
		vv: func(out, a, b []T) {
			a, b = a[:len(out)], b[:len(out)]
			for i := range out {
				out[i] = max(a[i], b[i])
			}
		},
		vs: func(out, a []T, b T) {
			a = a[:len(out)]
			for i := range out {
				out[i] = max(a[i], b)
			}
		},
		sv: func(out []T, a T, b []T) {
			b = b[:len(out)]
			for i := range out {
				out[i] = max(a, b[i])
			}
		},
	}
}

func minKernels[T gobackend.PODNumericConstraints]() binaryKernels[T] {
	return binaryKernels[T]{
		vv: func(out, a, b []T) {
			a, b = a[:len(out)], b[:len(out)]
			for i := range out {
				out[i] = min(a[i], b[i])
			}
		},
		vs: func(out, a []T, b T) {
			a = a[:len(out)]
			for i := range out {
				out[i] = min(a[i], b)
			}
		},
		sv: func(out []T, a T, b []T) {
			b = b[:len(out)]
			for i := range out {
				out[i] = min(a, b[i])
			}
		},
	}
}

// Binary ops with float32 kernels that a SIMD file may install (binary_simd_amd64.go).
const (
	binaryAdd = iota
	binarySub
	binaryMul
	binaryDiv
	numFastBinary
)

// f32Kernels holds the SIMD kernels of the float32 binary ops; a zero entry means none.
var f32Kernels [numFastBinary]binaryKernels[float32]

// kernelsFor returns the SIMD float32 kernels of op when T is float32 and they exist, else the
// plain loops from generic.
func kernelsFor[T gobackend.PODNumericConstraints](op int, generic func() binaryKernels[T]) binaryKernels[T] {
	if k, ok := any(f32Kernels[op]).(binaryKernels[T]); ok && k.vv != nil {
		return k
	}
	return generic()
}

// binaryWithKernels dispatches a binary op: scalar operands and equal shapes straight to the
// kernels, broadcasting through stridedBinary, and what that refuses through the reference
// iterator with the per-element op.
func binaryWithKernels[T gobackend.PODNumericConstraints](lhs, rhs, output []T, lhsShape, rhsShape, outputShape shapes.Shape,
	k binaryKernels[T], op func(a, b T) T) {
	switch {
	case len(rhs) == 1 && len(lhs) == len(output):
		k.vs(output, lhs, rhs[0])
	case len(lhs) == 1 && len(rhs) == len(output):
		k.sv(output, lhs[0], rhs)
	case lhsShape.Equal(rhsShape):
		k.vv(output, lhs, rhs)
	case stridedBinary(lhs, rhs, output, lhsShape, rhsShape, outputShape, k):
	default:
		zipIter := gobackend.NewZippedBroadcastIterator(lhsShape, rhsShape, outputShape)
		for indices := range zipIter.IterFlatIndices() {
			output[indices.TgtFlatIdx] = op(lhs[indices.LHSFlatIdx], rhs[indices.RHSFlatIdx])
		}
	}
}
