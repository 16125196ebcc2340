// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fusedops

import (
	"simd/archsimd"
	"unsafe"

	"github.com/gomlx/compute/support/envutil"
)

// The vector loops of flashvec.go: each returns how many leading elements it did (whole vectors
// of eight), the caller does the rest with the same scalar operations.
var vecAVX2 = archsimd.X86.AVX2() && envutil.MustReadBool(envutil.SIMD_AVX2_Env, true)

type v8 = archsimd.Float32x8

func ld(x []float32, i int) v8    { return archsimd.LoadFloat32x8((*[8]float32)(x[i : i+8])) }
func st(v v8, x []float32, i int) { v.Store((*[8]float32)(x[i : i+8])) }
func bc(c float32) v8             { return archsimd.BroadcastFloat32x8(c) }
func whole(x []float32) (n int)   { return len(x) &^ 7 }

func maxVector(x []float32, m *float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	acc := bc(*m)
	for i := 0; i < n; i += 8 {
		acc = acc.Max(ld(x, i))
	}
	var tmp [8]float32
	acc.Store(&tmp)
	for _, v := range tmp {
		if v > *m {
			*m = v
		}
	}
	return n
}

func sumVector(x []float32, lanes *[8]float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	acc := archsimd.LoadFloat32x8(lanes)
	for i := 0; i < n; i += 8 {
		acc = acc.Add(ld(x, i))
	}
	acc.Store(lanes)
	return n
}

func subScalarVector(x []float32, c float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	cv := bc(c)
	for i := 0; i < n; i += 8 {
		st(ld(x, i).Sub(cv), x, i)
	}
	return n
}

func subVector(x, y []float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	for i := 0; i < n; i += 8 {
		st(ld(x, i).Sub(ld(y, i)), x, i)
	}
	return n
}

func addVector(x, y []float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	for i := 0; i < n; i += 8 {
		st(ld(x, i).Add(ld(y, i)), x, i)
	}
	return n
}

func scaleAddVector(x []float32, a float32, y []float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	av := bc(a)
	for i := 0; i < n; i += 8 {
		st(ld(x, i).Mul(av).Add(ld(y, i)), x, i)
	}
	return n
}

func divVector(x []float32, c float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	cv := bc(c)
	for i := 0; i < n; i += 8 {
		st(ld(x, i).Div(cv), x, i)
	}
	return n
}

func dScoresVector(p, dp []float32, c float32) int {
	n := whole(p)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	cv := bc(c)
	for i := 0; i < n; i += 8 {
		st(ld(p, i).Mul(ld(dp, i).Sub(cv)), p, i)
	}
	return n
}

func dScoresColsVector(p, dp, dl []float32) int {
	n := whole(p)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	for i := 0; i < n; i += 8 {
		st(ld(p, i).Mul(ld(dp, i).Sub(ld(dl, i))), p, i)
	}
	return n
}

func oneMinusSquareVector(g, t []float32) int {
	n := whole(g)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	one := bc(1)
	for i := 0; i < n; i += 8 {
		ti := ld(t, i)
		st(ld(g, i).Mul(one.Sub(ti.Mul(ti))), g, i)
	}
	return n
}

func scaleVector(x []float32, c float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	cv := bc(c)
	for i := 0; i < n; i += 8 {
		st(ld(x, i).Mul(cv), x, i)
	}
	return n
}

// scaleMaxVector scales the whole vectors by c and takes their maximum into m, as scaleVector
// then maxVector do (Temper fork: decodeattn.go).
func scaleMaxVector(x []float32, c float32, m *float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	cv, acc := bc(c), bc(*m)
	for i := 0; i < n; i += 8 {
		y := ld(x, i).Mul(cv)
		st(y, x, i)
		acc = acc.Max(y)
	}
	var tmp [8]float32
	acc.Store(&tmp)
	for _, v := range tmp {
		if v > *m {
			*m = v
		}
	}
	return n
}

// dotVector adds the products of the whole vectors into lanes (Temper fork: decodeattn.go).
func dotVector(x, y []float32, lanes *[8]float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	acc := archsimd.LoadFloat32x8(lanes)
	for i := 0; i < n; i += 8 {
		acc = acc.Add(ld(x, i).Mul(ld(y, i)))
	}
	acc.Store(lanes)
	return n
}

// axpyVector sets x[i] += a·y[i] over the whole vectors (Temper fork: decodeattn.go).
func axpyVector(x []float32, a float32, y []float32) int {
	n := whole(x)
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	av := bc(a)
	for i := 0; i < n; i += 8 {
		st(ld(x, i).Add(ld(y, i).Mul(av)), x, i)
	}
	return n
}

// The decode attention's loops (Temper fork: decodeattn.go). They address the rows of keys and
// values with unsafe.Add from the slices' data pointers, after checking once that every visible
// row lies inside: per-load bounds checks and slice headers took most of the registers and
// instructions of the loops. Each score is vecDot's (eight lanes of rounded products, then the
// same tree) and each output element vecAxpy's chain in key order, so the bits are the scalar
// loops'.

// rowsInside reports whether rows vis of a [rows, d] matrix x are inside x (d > 0). The largest
// index as an unsigned number (a negative one is huge) is compared once: four running maxima
// (branch-free, independent) instead of two compares and a branch per row.
func rowsInside(x []float32, d int, vis []int32) bool {
	if d <= 0 {
		return false
	}
	rows := uint64(len(x) / d)
	var m0, m1, m2, m3 uint32
	i := 0
	for ; i+4 <= len(vis); i += 4 {
		w := vis[i : i+4 : i+4]
		m0, m1, m2, m3 = max(m0, uint32(w[0])), max(m1, uint32(w[1])), max(m2, uint32(w[2])), max(m3, uint32(w[3]))
	}
	for ; i < len(vis); i++ {
		m0 = max(m0, uint32(vis[i]))
	}
	return len(vis) == 0 || uint64(max(m0, m1, m2, m3)) < rows
}

// ldp loads eight floats at p + off bytes.
func ldp(p unsafe.Pointer, off uintptr) v8 {
	return archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, off)))
}

// stp stores eight floats at p + off bytes.
func stp(v v8, p unsafe.Pointer, off uintptr) { v.Store((*[8]float32)(unsafe.Add(p, off))) }

// tree4 is the tree of vecDot for four lane accumulators: [s0, s1, s0, s1 | s2, s3, s2, s3]. The
// halves of a0 and a2, then of a1 and a3, are added ([lanes 0..3 + lanes 4..7 of a0 | of a2]),
// then ((0+1)+(2+3)) per accumulator by two horizontal pair sums: the same pairs in the same order.
func tree4(a0, a1, a2, a3 v8) v8 {
	h02 := a0.Select128FromPair(0, 2, a2).Add(a0.Select128FromPair(1, 3, a2))
	h13 := a1.Select128FromPair(0, 2, a3).Add(a1.Select128FromPair(1, 3, a3))
	p := h02.AddPairsGrouped(h13)
	return p.AddPairsGrouped(p)
}

// rowScoresVector is rowScores for a head_dim of whole vectors: four keys at a time (four
// independent chains of adds instead of one that waits on each add).
func rowScoresVector(sc, q, keys []float32, vis []int32) bool {
	d := len(q)
	if !vecAVX2 || d == 0 || d%8 != 0 || len(sc) < len(vis) || !rowsInside(keys, d, vis) {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	kb, qp := unsafe.Pointer(unsafe.SliceData(keys)), unsafe.Pointer(unsafe.SliceData(q))
	db := uintptr(d) * 4
	var tmp [8]float32
	t := 0
	for ; t+4 <= len(vis); t += 4 {
		k0, k1 := unsafe.Add(kb, uintptr(vis[t])*db), unsafe.Add(kb, uintptr(vis[t+1])*db)
		k2, k3 := unsafe.Add(kb, uintptr(vis[t+2])*db), unsafe.Add(kb, uintptr(vis[t+3])*db)
		a0, a1, a2, a3 := bc(0), bc(0), bc(0), bc(0)
		for off := uintptr(0); off < db; off += 32 {
			y := ldp(qp, off)
			a0 = a0.Add(y.Mul(ldp(k0, off)))
			a1 = a1.Add(y.Mul(ldp(k1, off)))
			a2 = a2.Add(y.Mul(ldp(k2, off)))
			a3 = a3.Add(y.Mul(ldp(k3, off)))
		}
		tree4(a0, a1, a2, a3).Store(&tmp)
		sc[t], sc[t+1], sc[t+2], sc[t+3] = tmp[0], tmp[1], tmp[4], tmp[5]
	}
	for ; t < len(vis); t++ {
		k := unsafe.Add(kb, uintptr(vis[t])*db)
		acc := bc(0)
		for off := uintptr(0); off < db; off += 32 {
			acc = acc.Add(ldp(qp, off).Mul(ldp(k, off)))
		}
		acc.Store(&tmp)
		sc[t] = ((tmp[0] + tmp[4]) + (tmp[1] + tmp[5])) + ((tmp[2] + tmp[6]) + (tmp[3] + tmp[7]))
	}
	return true
}

// rowAccumulateVector is rowAccumulate for a head_dim of whole vectors: 32 columns of o at a time
// stay in registers over all the keys (four chains of adds) instead of a load and a store per key.
// (64 columns need more registers than the compiler keeps them in: slower.)
func rowAccumulateVector(o, p, values []float32, vis []int32) bool {
	d := len(o)
	if !vecAVX2 || d == 0 || d%8 != 0 || len(p) < len(vis) || !rowsInside(values, d, vis) {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	vb, op := unsafe.Pointer(unsafe.SliceData(values)), unsafe.Pointer(unsafe.SliceData(o))
	db := uintptr(d) * 4
	i := uintptr(0)
	for ; i+128 <= db; i += 128 {
		a0, a1, a2, a3 := ldp(op, i), ldp(op, i+32), ldp(op, i+64), ldp(op, i+96)
		for t, j := range vis {
			v := unsafe.Add(vb, uintptr(j)*db+i)
			w := bc(p[t])
			a0 = a0.Add(ldp(v, 0).Mul(w))
			a1 = a1.Add(ldp(v, 32).Mul(w))
			a2 = a2.Add(ldp(v, 64).Mul(w))
			a3 = a3.Add(ldp(v, 96).Mul(w))
		}
		stp(a0, op, i)
		stp(a1, op, i+32)
		stp(a2, op, i+64)
		stp(a3, op, i+96)
	}
	for ; i < db; i += 32 {
		a := ldp(op, i)
		for t, j := range vis {
			a = a.Add(ldp(vb, uintptr(j)*db+i).Mul(bc(p[t])))
		}
		stp(a, op, i)
	}
	return true
}

// tree8 is the tree of vecDot for eight lane accumulators at once: [s0, s1, …, s7]. The halves
// of a0 and a4 (a1 and a5, …) are added ([lanes 0..3 + lanes 4..7 of a0 | of a4]), then
// ((0+4)+(1+5)) + ((2+6)+(3+7)) per accumulator by three horizontal pair sums: vecDot's pairs in
// vecDot's order, and the eight scores come out in one vector.
func tree8(a0, a1, a2, a3, a4, a5, a6, a7 v8) v8 {
	h04 := a0.Select128FromPair(0, 2, a4).Add(a0.Select128FromPair(1, 3, a4))
	h15 := a1.Select128FromPair(0, 2, a5).Add(a1.Select128FromPair(1, 3, a5))
	h26 := a2.Select128FromPair(0, 2, a6).Add(a2.Select128FromPair(1, 3, a6))
	h37 := a3.Select128FromPair(0, 2, a7).Add(a3.Select128FromPair(1, 3, a7))
	return h04.AddPairsGrouped(h15).AddPairsGrouped(h26.AddPairsGrouped(h37))
}

// groupScoresVector is groupScores for one to three query rows and a head_dim of whole vectors.
// Two or three rows of head_dim 32 or 64 on AVX-512: groupScores512 (assembly, eight keys at a
// time). A head_dim of up to 32: blockScoresVector. Else two keys at a time against the rows (four or
// six independent chains of adds), each key row loaded once for them. Other row counts: false.
func groupScoresVector(sc, q []float32, nr int, keys []float32, vis []int32) bool {
	d := len(q) / max(nr, 1)
	n := len(vis)
	if !vecAVX2 || nr < 1 || nr > 3 || d == 0 || d%8 != 0 || len(q) != nr*d || len(sc) < nr*n || !rowsInside(keys, d, vis) {
		return false
	}
	if groupScores512(sc, q, nr, keys, vis) { // Temper fork: AVX-512, eight keys at a time (flashvec512_amd64.go)
		return true
	}
	if d <= 32 {
		return blockScoresVector(sc, q, nr, keys, vis)
	}
	if nr == 1 {
		return rowScoresVector(sc, q, keys, vis)
	}
	if nr == 2 {
		return pairScoresVector(sc, q, keys, vis)
	}
	defer archsimd.ClearAVXUpperBits()
	kb := unsafe.Pointer(unsafe.SliceData(keys))
	q0 := unsafe.Pointer(unsafe.SliceData(q))
	db := uintptr(d) * 4
	q1, q2 := unsafe.Add(q0, db), unsafe.Add(q0, 2*db)
	s0, s1, s2 := sc[:n], sc[n:2*n], sc[2*n:3*n]
	var tmp [8]float32
	t := 0
	for ; t+2 <= n; t += 2 {
		k0, k1 := unsafe.Add(kb, uintptr(vis[t])*db), unsafe.Add(kb, uintptr(vis[t+1])*db)
		a00, a01, a10, a11, a20, a21 := bc(0), bc(0), bc(0), bc(0), bc(0), bc(0)
		for off := uintptr(0); off < db; off += 32 {
			x0, x1 := ldp(k0, off), ldp(k1, off)
			y := ldp(q0, off)
			a00, a01 = a00.Add(y.Mul(x0)), a01.Add(y.Mul(x1))
			y = ldp(q1, off)
			a10, a11 = a10.Add(y.Mul(x0)), a11.Add(y.Mul(x1))
			y = ldp(q2, off)
			a20, a21 = a20.Add(y.Mul(x0)), a21.Add(y.Mul(x1))
		}
		// [s(a00), s(a01), …, … | s(a10), s(a11), …, …], then a20, a21 with themselves.
		tree4(a00, a01, a10, a11).Store(&tmp)
		s0[t], s0[t+1], s1[t], s1[t+1] = tmp[0], tmp[1], tmp[4], tmp[5]
		tree4(a20, a21, a20, a21).Store(&tmp)
		s2[t], s2[t+1] = tmp[0], tmp[1]
	}
	if t < n {
		rowScoresVector(s0[t:], q[:d], keys, vis[t:])
		rowScoresVector(s1[t:], q[d:2*d], keys, vis[t:])
		rowScoresVector(s2[t:], q[2*d:], keys, vis[t:])
	}
	return true
}

// blockScoresVector is groupScoresVector for a head_dim of 8 to 32 (checked by the caller):
// eight keys at a time per row, one accumulator per key (eight independent chains of adds), the
// eight scores reduced together by tree8 and stored as one vector; the last keys (fewer than eight)
// by rowScoresVector. The key rows of a block are read once per query row, from L1 after the
// first. Measured (BenchmarkDecodeRows, -cpu 1, AVX-512 machine): the small preset's two rows of
// head_dim 32 took 634 ns instead of 720 ns with the pair loop; the base preset's three rows of 64
// took longer (1406 ns instead of 1221 ns: eight key pointers and eight accumulators over eight
// vectors per row spill), so they keep the three-row loop.
func blockScoresVector(sc, q []float32, nr int, keys []float32, vis []int32) bool {
	d, n := len(q)/nr, len(vis)
	defer archsimd.ClearAVXUpperBits()
	kb := unsafe.Pointer(unsafe.SliceData(keys))
	q0 := unsafe.Pointer(unsafe.SliceData(q))
	db := uintptr(d) * 4
	t := 0
	for ; t+8 <= n; t += 8 {
		w := vis[t : t+8 : t+8]
		k0, k1 := unsafe.Add(kb, uintptr(w[0])*db), unsafe.Add(kb, uintptr(w[1])*db)
		k2, k3 := unsafe.Add(kb, uintptr(w[2])*db), unsafe.Add(kb, uintptr(w[3])*db)
		k4, k5 := unsafe.Add(kb, uintptr(w[4])*db), unsafe.Add(kb, uintptr(w[5])*db)
		k6, k7 := unsafe.Add(kb, uintptr(w[6])*db), unsafe.Add(kb, uintptr(w[7])*db)
		for r := range nr {
			qp := unsafe.Add(q0, uintptr(r)*db)
			a0, a1, a2, a3 := bc(0), bc(0), bc(0), bc(0)
			a4, a5, a6, a7 := bc(0), bc(0), bc(0), bc(0)
			for off := uintptr(0); off < db; off += 32 {
				y := ldp(qp, off)
				a0, a1 = a0.Add(y.Mul(ldp(k0, off))), a1.Add(y.Mul(ldp(k1, off)))
				a2, a3 = a2.Add(y.Mul(ldp(k2, off))), a3.Add(y.Mul(ldp(k3, off)))
				a4, a5 = a4.Add(y.Mul(ldp(k4, off))), a5.Add(y.Mul(ldp(k5, off)))
				a6, a7 = a6.Add(y.Mul(ldp(k6, off))), a7.Add(y.Mul(ldp(k7, off)))
			}
			st(tree8(a0, a1, a2, a3, a4, a5, a6, a7), sc, r*n+t)
		}
	}
	if t < n {
		for r := range nr {
			rowScoresVector(sc[r*n+t:(r+1)*n], q[r*d:(r+1)*d], keys, vis[t:])
		}
	}
	return true
}

// groupAccumulateVector is groupAccumulate for two or three query rows and a head_dim of whole
// vectors: 16 columns of the rows at a time stay in registers over all the keys (four or six
// chains of adds), each value row's 16 columns loaded once for them. Other row counts: false.
func groupAccumulateVector(o, p []float32, nr int, values []float32, vis []int32) bool {
	d := len(o) / max(nr, 1)
	n := len(vis)
	if !vecAVX2 || (nr != 2 && nr != 3) || d == 0 || d%8 != 0 || len(o) != nr*d || len(p) < nr*n || !rowsInside(values, d, vis) {
		return false
	}
	if groupAccumulate512(o, p, nr, values, vis) { // Temper fork: one sequential pass (flashvec512_amd64.go)
		return true
	}
	if nr == 2 {
		return pairAccumulateVector(o, p, values, vis)
	}
	defer archsimd.ClearAVXUpperBits()
	vb := unsafe.Pointer(unsafe.SliceData(values))
	o0 := unsafe.Pointer(unsafe.SliceData(o))
	db := uintptr(d) * 4
	o1, o2 := unsafe.Add(o0, db), unsafe.Add(o0, 2*db)
	p0, p1, p2 := p[:n], p[n:2*n], p[2*n:3*n]
	i := uintptr(0)
	for ; i+64 <= db; i += 64 {
		a00, a01, a10, a11 := ldp(o0, i), ldp(o0, i+32), ldp(o1, i), ldp(o1, i+32)
		a20, a21 := ldp(o2, i), ldp(o2, i+32)
		for t, j := range vis {
			v := unsafe.Add(vb, uintptr(j)*db+i)
			x0, x1 := ldp(v, 0), ldp(v, 32)
			w := bc(p0[t])
			a00, a01 = a00.Add(x0.Mul(w)), a01.Add(x1.Mul(w))
			w = bc(p1[t])
			a10, a11 = a10.Add(x0.Mul(w)), a11.Add(x1.Mul(w))
			w = bc(p2[t])
			a20, a21 = a20.Add(x0.Mul(w)), a21.Add(x1.Mul(w))
		}
		stp(a00, o0, i)
		stp(a01, o0, i+32)
		stp(a10, o1, i)
		stp(a11, o1, i+32)
		stp(a20, o2, i)
		stp(a21, o2, i+32)
	}
	if i < db { // the last 8 columns
		a0, a1, a2 := ldp(o0, i), ldp(o1, i), ldp(o2, i)
		for t, j := range vis {
			x := ldp(vb, uintptr(j)*db+i)
			a0, a1, a2 = a0.Add(x.Mul(bc(p0[t]))), a1.Add(x.Mul(bc(p1[t]))), a2.Add(x.Mul(bc(p2[t])))
		}
		stp(a0, o0, i)
		stp(a1, o1, i)
		stp(a2, o2, i)
	}
	return true
}

// pairScoresVector is groupScoresVector for two rows (checked by the caller): two keys at a time,
// four chains of adds, one tree4 for the four scores.
func pairScoresVector(sc, q, keys []float32, vis []int32) bool {
	defer archsimd.ClearAVXUpperBits()
	d, n := len(q)/2, len(vis)
	kb := unsafe.Pointer(unsafe.SliceData(keys))
	q0 := unsafe.Pointer(unsafe.SliceData(q))
	db := uintptr(d) * 4
	q1 := unsafe.Add(q0, db)
	s0, s1 := sc[:n], sc[n:2*n]
	var tmp [8]float32
	t := 0
	for ; t+2 <= n; t += 2 {
		k0, k1 := unsafe.Add(kb, uintptr(vis[t])*db), unsafe.Add(kb, uintptr(vis[t+1])*db)
		a00, a01, a10, a11 := bc(0), bc(0), bc(0), bc(0)
		for off := uintptr(0); off < db; off += 32 {
			x0, x1 := ldp(k0, off), ldp(k1, off)
			y := ldp(q0, off)
			a00, a01 = a00.Add(y.Mul(x0)), a01.Add(y.Mul(x1))
			y = ldp(q1, off)
			a10, a11 = a10.Add(y.Mul(x0)), a11.Add(y.Mul(x1))
		}
		tree4(a00, a01, a10, a11).Store(&tmp)
		s0[t], s0[t+1], s1[t], s1[t+1] = tmp[0], tmp[1], tmp[4], tmp[5]
	}
	if t < n {
		rowScoresVector(s0[t:], q[:d], keys, vis[t:])
		rowScoresVector(s1[t:], q[d:], keys, vis[t:])
	}
	return true
}

// pairAccumulateVector is groupAccumulateVector for two rows (checked by the caller).
func pairAccumulateVector(o, p, values []float32, vis []int32) bool {
	defer archsimd.ClearAVXUpperBits()
	d, n := len(o)/2, len(vis)
	vb := unsafe.Pointer(unsafe.SliceData(values))
	o0 := unsafe.Pointer(unsafe.SliceData(o))
	db := uintptr(d) * 4
	o1 := unsafe.Add(o0, db)
	p0, p1 := p[:n], p[n:2*n]
	i := uintptr(0)
	for ; i+64 <= db; i += 64 {
		a00, a01, a10, a11 := ldp(o0, i), ldp(o0, i+32), ldp(o1, i), ldp(o1, i+32)
		for t, j := range vis {
			v := unsafe.Add(vb, uintptr(j)*db+i)
			x0, x1 := ldp(v, 0), ldp(v, 32)
			w := bc(p0[t])
			a00, a01 = a00.Add(x0.Mul(w)), a01.Add(x1.Mul(w))
			w = bc(p1[t])
			a10, a11 = a10.Add(x0.Mul(w)), a11.Add(x1.Mul(w))
		}
		stp(a00, o0, i)
		stp(a01, o0, i+32)
		stp(a10, o1, i)
		stp(a11, o1, i+32)
	}
	if i < db { // the last 8 columns
		a0, a1 := ldp(o0, i), ldp(o1, i)
		for t, j := range vis {
			x := ldp(vb, uintptr(j)*db+i)
			a0, a1 = a0.Add(x.Mul(bc(p0[t]))), a1.Add(x.Mul(bc(p1[t])))
		}
		stp(a0, o0, i)
		stp(a1, o1, i)
	}
	return true
}

// ropeVector does ropeRow's rotated pairs (i, i+half) for i < a multiple of eight below half and
// returns how many it did (Temper fork: decodeattn.go).
func ropeVector(dst, x, cos, sin []float32, half int) int {
	n := half &^ 7
	if !vecAVX2 || n == 0 {
		return 0
	}
	defer archsimd.ClearAVXUpperBits()
	for i := 0; i < n; i += 8 {
		x1, x2 := ld(x, i), ld(x, i+half)
		st(x1.Mul(ld(cos, i)).Sub(x2.Mul(ld(sin, i))), dst, i)
		st(x2.Mul(ld(cos, i+half)).Add(x1.Mul(ld(sin, i+half))), dst, i+half)
	}
	return n
}

// decodeSoftmaxVector is decodeRows' softmax of the rows sc [nr, n] (Temper fork: AVX-512 only,
// decodeSoftmax512; false elsewhere).
func decodeSoftmaxVector(sc []float32, nr, n int, scale float32, scaleMax bool, mx, sums *[decodeGroup]float32) bool {
	return decodeSoftmax512(sc, nr, n, scale, scaleMax, mx, sums)
}

// decodeDivVector is decodeRows' final division of the rows of o by their sums (Temper fork:
// AVX-512 only, decodeDiv512; false elsewhere).
func decodeDivVector(o []float32, nr int, sums *[decodeGroup]float32) bool {
	return decodeDiv512(o, nr, sums)
}
