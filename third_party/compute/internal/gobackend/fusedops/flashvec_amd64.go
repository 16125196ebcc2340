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
func rowScoresVector(sc, q, keys []float32, vis []int32) bool {
	d := len(q)
	if !vecAVX2 || d == 0 || d%8 != 0 {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	var tmp [8]float32
	for t, j := range vis {
		k := keys[int(j)*d : int(j)*d+d]
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
// decodeattn.go).
func rowAccumulateVector(o, p, values []float32, vis []int32) bool {
	d := len(o)
	if !vecAVX2 || d == 0 || d%8 != 0 {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	for t, j := range vis {
		v := values[int(j)*d : int(j)*d+d]
		pv := bc(p[t])
		for i := 0; i < d; i += 8 {
			st(ld(o, i).Add(ld(v, i).Mul(pv)), o, i)
		}
	}
	return true
}
