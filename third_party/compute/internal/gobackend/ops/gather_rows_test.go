// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

func f32Bytes(x []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x)) }

// TestGatherRows: an embedding lookup copies whole rows, clamping out-of-range indices as XLA does
// (hand-computed), and gathers the fast path does not cover are declined untouched.
func TestGatherRows(t *testing.T) {
	table := []float32{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32} // [4, 3]
	operand := &gobackend.Buffer{RawShape: shapes.Make(dtypes.Float32, 4, 3), Flat: table}
	lookup := &gatherNode{indexVectorAxis: 2, offsetOutputAxes: []int{2}, collapsedSlicesAxes: []int{0},
		startIndexMap: []int{0}, sliceSizes: []int{1, 3}}
	cases := []struct {
		name string
		p    *gatherNode
		ind  []int32
		dims []int // indices shape
		want []float32
		ok   bool
	}{
		{"rows", lookup, []int32{2, 0, 3, 1}, []int{2, 2, 1}, []float32{20, 21, 22, 0, 1, 2, 30, 31, 32, 10, 11, 12}, true},
		{"clamped", lookup, []int32{7, -2}, []int{1, 2, 1}, []float32{30, 31, 32, 0, 1, 2}, true},
		{"partial slice", &gatherNode{indexVectorAxis: 2, offsetOutputAxes: []int{2}, collapsedSlicesAxes: []int{0},
			startIndexMap: []int{0}, sliceSizes: []int{1, 2}}, []int32{1}, []int{1, 1, 1}, nil, false},
		{"index vector of two", &gatherNode{indexVectorAxis: 1, offsetOutputAxes: nil, collapsedSlicesAxes: []int{0, 1},
			startIndexMap: []int{0, 1}, sliceSizes: []int{1, 1}}, []int32{1, 2}, []int{1, 2}, nil, false},
	}
	for _, c := range cases {
		ind := &gobackend.Buffer{RawShape: shapes.Make(dtypes.Int32, c.dims...), Flat: c.ind}
		n := len(c.want)
		if n == 0 {
			n = 6
		}
		out := make([]float32, n)
		outDims := append(slices.Clone(c.dims[:len(c.dims)-1]), 3)
		if !c.ok {
			outDims = []int{6}
		}
		output := &gobackend.Buffer{RawShape: shapes.Make(dtypes.Float32, outDims...), Flat: out}
		ok := gatherRows(c.p, operand, ind, output, f32Bytes(table), f32Bytes(out))
		if ok != c.ok {
			t.Fatalf("%s: fast path = %v, want %v", c.name, ok, c.ok)
		}
		if !ok {
			if slices.ContainsFunc(out, func(v float32) bool { return v != 0 }) {
				t.Fatalf("%s: declined but wrote %v", c.name, out)
			}
			continue
		}
		if !slices.Equal(out, c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, out, c.want)
		}
	}
}
