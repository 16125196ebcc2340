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

// TestDecodeScoresNoAlloc: the AVX-512 scores' tail (fewer than eight keys, through scratch on the
// stack) allocates nothing; through a func value the kernels' //go:noescape was lost and every
// call with a tail allocated its scratch.
func TestDecodeScoresNoAlloc(t *testing.T) {
	for _, c := range []struct{ nr, d int }{{3, 64}, {2, 32}} {
		q, keys := make([]float32, c.nr*c.d), make([]float32, 50*c.d)
		vis := make([]int32, 41)
		for i := range vis {
			vis[i] = int32(i)
		}
		sc := make([]float32, c.nr*len(vis))
		o, p := make([]float32, c.nr*c.d), make([]float32, c.nr*len(vis))
		if n := testing.AllocsPerRun(20, func() {
			groupScores(sc, q, c.nr, keys, vis)
			groupAccumulate(o, p, c.nr, keys, vis)
		}); n != 0 {
			t.Fatalf("rows %d, head_dim %d: %g allocations per call", c.nr, c.d, n)
		}
	}
}
