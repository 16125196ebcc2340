// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fusedops

import (
	"simd/archsimd"

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

// rowScoresVector is rowScores for a head_dim of whole vectors, in one call (Temper fork:
// decodeattn.go). Each score is vecDot's: eight lanes of rounded products, then the same tree.
// Four keys go at once (four independent chains of adds instead of one that waits on each add),
// and their trees as three vector steps (sums of halves, then two horizontal pair sums) that add
// the same pairs in the same order. (Eight keys at once need more registers than the compiler
// keeps them in: slower.)
func rowScoresVector(sc, q, keys []float32, vis []int32) bool {
	d := len(q)
	if !vecAVX2 || d == 0 || d%8 != 0 {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	var tmp [8]float32
	t := 0
	for ; t+4 <= len(vis); t += 4 {
		k0, k1 := keys[int(vis[t])*d:][:d], keys[int(vis[t+1])*d:][:d]
		k2, k3 := keys[int(vis[t+2])*d:][:d], keys[int(vis[t+3])*d:][:d]
		a0, a1, a2, a3 := bc(0), bc(0), bc(0), bc(0)
		for i := 0; i < d; i += 8 {
			qi := ld(q, i)
			a0 = a0.Add(qi.Mul(ld(k0, i)))
			a1 = a1.Add(qi.Mul(ld(k1, i)))
			a2 = a2.Add(qi.Mul(ld(k2, i)))
			a3 = a3.Add(qi.Mul(ld(k3, i)))
		}
		// [lanes 0..3 + lanes 4..7 of a0 | of a2], the same of a1 | a3; then ((0+1)+(2+3)) per key:
		// r = [s0, s1, s0, s1 | s2, s3, s2, s3].
		h02 := a0.Select128FromPair(0, 2, a2).Add(a0.Select128FromPair(1, 3, a2))
		h13 := a1.Select128FromPair(0, 2, a3).Add(a1.Select128FromPair(1, 3, a3))
		p := h02.AddPairsGrouped(h13)
		p.AddPairsGrouped(p).Store(&tmp)
		sc[t], sc[t+1], sc[t+2], sc[t+3] = tmp[0], tmp[1], tmp[4], tmp[5]
	}
	for ; t < len(vis); t++ {
		k := keys[int(vis[t])*d:][:d]
		acc := bc(0)
		for i := 0; i < d; i += 8 {
			acc = acc.Add(ld(q, i).Mul(ld(k, i)))
		}
		acc.Store(&tmp)
		sc[t] = ((tmp[0] + tmp[4]) + (tmp[1] + tmp[5])) + ((tmp[2] + tmp[6]) + (tmp[3] + tmp[7]))
	}
	return true
}

// rowAccumulateVector is rowAccumulate for a head_dim of whole vectors, in one call (Temper fork:
// decodeattn.go). 32 columns of o at a time stay in registers over all the keys (four
// accumulators) instead of a load and a store per key. (64 columns need more registers than the
// compiler keeps them in: slower.)
func rowAccumulateVector(o, p, values []float32, vis []int32) bool {
	d := len(o)
	if !vecAVX2 || d == 0 || d%8 != 0 {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	i := 0
	for ; i+32 <= d; i += 32 {
		oc := (*[32]float32)(o[i : i+32])
		a0, a1, a2, a3 := ld32(oc, 0), ld32(oc, 1), ld32(oc, 2), ld32(oc, 3)
		for t, j := range vis {
			v := (*[32]float32)(values[int(j)*d+i : int(j)*d+i+32])
			pv := bc(p[t])
			a0 = a0.Add(ld32(v, 0).Mul(pv))
			a1 = a1.Add(ld32(v, 1).Mul(pv))
			a2 = a2.Add(ld32(v, 2).Mul(pv))
			a3 = a3.Add(ld32(v, 3).Mul(pv))
		}
		a0.Store((*[8]float32)(oc[0:8]))
		a1.Store((*[8]float32)(oc[8:16]))
		a2.Store((*[8]float32)(oc[16:24]))
		a3.Store((*[8]float32)(oc[24:32]))
	}
	for ; i < d; i += 8 {
		a := ld(o, i)
		for t, j := range vis {
			a = a.Add(ld(values, int(j)*d+i).Mul(bc(p[t])))
		}
		st(a, o, i)
	}
	return true
}

// ld32 loads vector i of a 32-float array.
func ld32(x *[32]float32, i int) v8 {
	return archsimd.LoadFloat32x8((*[8]float32)(x[i*8 : i*8+8]))
}

// groupScoresVector is groupScores for three query rows and a head_dim of whole vectors (Temper
// fork: decodeattn.go): two keys at a time against the three rows, six independent chains of adds,
// each key row loaded once; the trees as in rowScoresVector. Other row counts: false.
func groupScoresVector(sc, q []float32, nr int, keys []float32, vis []int32) bool {
	d := len(q) / max(nr, 1)
	if !vecAVX2 || nr != 3 || d == 0 || d%8 != 0 {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	n := len(vis)
	q0, q1, q2 := q[:d], q[d:2*d], q[2*d:3*d]
	s0, s1, s2 := sc[:n], sc[n:2*n], sc[2*n:3*n]
	var tmp [8]float32
	t := 0
	for ; t+2 <= n; t += 2 {
		k0, k1 := keys[int(vis[t])*d:][:d], keys[int(vis[t+1])*d:][:d]
		a00, a01, a10, a11, a20, a21 := bc(0), bc(0), bc(0), bc(0), bc(0), bc(0)
		for i := 0; i < d; i += 8 {
			x0, x1 := ld(k0, i), ld(k1, i)
			y := ld(q0, i)
			a00, a01 = a00.Add(y.Mul(x0)), a01.Add(y.Mul(x1))
			y = ld(q1, i)
			a10, a11 = a10.Add(y.Mul(x0)), a11.Add(y.Mul(x1))
			y = ld(q2, i)
			a20, a21 = a20.Add(y.Mul(x0)), a21.Add(y.Mul(x1))
		}
		// As in rowScoresVector: r = [s(a00), s(a01), …, … | s(a10), s(a11), …, …].
		h0 := a00.Select128FromPair(0, 2, a10).Add(a00.Select128FromPair(1, 3, a10))
		h1 := a01.Select128FromPair(0, 2, a11).Add(a01.Select128FromPair(1, 3, a11))
		p := h0.AddPairsGrouped(h1)
		p.AddPairsGrouped(p).Store(&tmp)
		s0[t], s0[t+1], s1[t], s1[t+1] = tmp[0], tmp[1], tmp[4], tmp[5]
		h2 := a20.Select128FromPair(0, 2, a21).Add(a20.Select128FromPair(1, 3, a21))
		p = h2.AddPairsGrouped(h2)
		p.AddPairsGrouped(p).Store(&tmp)
		s2[t], s2[t+1] = tmp[0], tmp[4]
	}
	if t < n {
		rowScoresVector(s0[t:], q0, keys, vis[t:])
		rowScoresVector(s1[t:], q1, keys, vis[t:])
		rowScoresVector(s2[t:], q2, keys, vis[t:])
	}
	return true
}

// groupAccumulateVector is groupAccumulate for three query rows and a head_dim of whole vectors
// (Temper fork: decodeattn.go): 16 columns of the three rows at a time stay in registers over all
// the keys (six chains of adds), each value row's 16 columns loaded once for the three. Other row
// counts: false.
func groupAccumulateVector(o, p []float32, nr int, values []float32, vis []int32) bool {
	d := len(o) / max(nr, 1)
	if !vecAVX2 || nr != 3 || d == 0 || d%8 != 0 {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	n := len(vis)
	o0, o1, o2 := o[:d], o[d:2*d], o[2*d:3*d]
	p0, p1, p2 := p[:n], p[n:2*n], p[2*n:3*n]
	i := 0
	for ; i+16 <= d; i += 16 {
		a00, a01, a10, a11, a20, a21 := ld(o0, i), ld(o0, i+8), ld(o1, i), ld(o1, i+8), ld(o2, i), ld(o2, i+8)
		for t, j := range vis {
			v := (*[16]float32)(values[int(j)*d+i : int(j)*d+i+16])
			x0 := archsimd.LoadFloat32x8((*[8]float32)(v[0:8]))
			x1 := archsimd.LoadFloat32x8((*[8]float32)(v[8:16]))
			w := bc(p0[t])
			a00, a01 = a00.Add(x0.Mul(w)), a01.Add(x1.Mul(w))
			w = bc(p1[t])
			a10, a11 = a10.Add(x0.Mul(w)), a11.Add(x1.Mul(w))
			w = bc(p2[t])
			a20, a21 = a20.Add(x0.Mul(w)), a21.Add(x1.Mul(w))
		}
		st(a00, o0, i)
		st(a01, o0, i+8)
		st(a10, o1, i)
		st(a11, o1, i+8)
		st(a20, o2, i)
		st(a21, o2, i+8)
	}
	if i < d { // the last 8 columns
		a0, a1, a2 := ld(o0, i), ld(o1, i), ld(o2, i)
		for t, j := range vis {
			x := ld(values, int(j)*d+i)
			a0, a1, a2 = a0.Add(x.Mul(bc(p0[t]))), a1.Add(x.Mul(bc(p1[t]))), a2.Add(x.Mul(bc(p2[t])))
		}
		st(a0, o0, i)
		st(a1, o1, i)
		st(a2, o2, i)
	}
	return true
}
