// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fusedops

import "testing"

// TestRowsInside: rowsInside (the bounds check of the decode attention's vector and assembly
// loops) accepts exactly the rows that lie wholly inside the matrix, at every position of a bad
// index among the running maxima, with a partial last row, negative indices and none.
func TestRowsInside(t *testing.T) {
	const d = 8
	x := make([]float32, 5*d+3) // rows 0..4 whole, row 5 partial
	if !rowsInside(x, d, nil) || rowsInside(x, 0, []int32{0}) {
		t.Fatal("no rows: inside; d = 0: not")
	}
	for n := 1; n <= 11; n++ {
		for bad := range n {
			for _, v := range []int32{5, 6, -1, -1 << 31, 1<<31 - 1} {
				vis := make([]int32, n)
				for i := range vis {
					vis[i] = int32(i % 5)
				}
				if !rowsInside(x, d, vis) {
					t.Fatalf("n=%d: rows %v reported outside", n, vis)
				}
				vis[bad] = v
				if rowsInside(x, d, vis) {
					t.Fatalf("n=%d: rows %v reported inside", n, vis)
				}
			}
		}
	}
	if !rowsInside(x[:5*d], d, []int32{4, 0, 3}) || rowsInside(x[:5*d-1], d, []int32{4}) {
		t.Fatal("last whole row")
	}
}
