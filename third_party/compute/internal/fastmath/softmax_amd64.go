// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fastmath

import "simd/archsimd"

// sumLanesVector adds the whole blocks of 16 elements of x into lanes (lane j gets elements j, j+16…)
// and returns how many elements it consumed.
func sumLanesVector(x []float32, lanes *[16]float32) int {
	n := len(x)
	i := 0
	defer archsimd.ClearAVXUpperBits()
	switch {
	case hasAVX512:
		acc := archsimd.LoadFloat32x16(lanes)
		for ; i+16 <= n; i += 16 {
			acc = acc.Add(archsimd.LoadFloat32x16((*[16]float32)(x[i : i+16])))
		}
		acc.Store(lanes)
	case hasAVX2:
		lo := archsimd.LoadFloat32x8((*[8]float32)(lanes[:8]))
		hi := archsimd.LoadFloat32x8((*[8]float32)(lanes[8:]))
		for ; i+16 <= n; i += 16 {
			lo = lo.Add(archsimd.LoadFloat32x8((*[8]float32)(x[i : i+8])))
			hi = hi.Add(archsimd.LoadFloat32x8((*[8]float32)(x[i+8 : i+16])))
		}
		lo.Store((*[8]float32)(lanes[:8]))
		hi.Store((*[8]float32)(lanes[8:]))
	}
	return i
}

// maxVector folds the whole vectors of x into *m and returns how many elements it consumed.
func maxVector(x []float32, m *float32) int {
	n := len(x)
	i := 0
	var tmp [16]float32
	defer archsimd.ClearAVXUpperBits()
	switch {
	case hasAVX512 && n >= 16:
		acc := archsimd.BroadcastFloat32x16(*m)
		for ; i+16 <= n; i += 16 {
			acc = acc.Max(archsimd.LoadFloat32x16((*[16]float32)(x[i : i+16])))
		}
		acc.Store(&tmp)
	case hasAVX2 && n >= 8:
		acc := archsimd.BroadcastFloat32x8(*m)
		for ; i+8 <= n; i += 8 {
			acc = acc.Max(archsimd.LoadFloat32x8((*[8]float32)(x[i : i+8])))
		}
		acc.Store((*[8]float32)(tmp[:8]))
		for j := 8; j < 16; j++ {
			tmp[j] = tmp[0]
		}
	default:
		return 0
	}
	for _, v := range tmp {
		if v > *m {
			*m = v
		}
	}
	return i
}

// subScalarVector sets dst[i] = src[i] − c over the whole vectors and returns how many it wrote.
func subScalarVector(dst, src []float32, c float32) int {
	n := len(src)
	i := 0
	defer archsimd.ClearAVXUpperBits()
	switch {
	case hasAVX512:
		cv := archsimd.BroadcastFloat32x16(c)
		for ; i+16 <= n; i += 16 {
			archsimd.LoadFloat32x16((*[16]float32)(src[i : i+16])).Sub(cv).Store((*[16]float32)(dst[i : i+16]))
		}
	case hasAVX2:
		cv := archsimd.BroadcastFloat32x8(c)
		for ; i+8 <= n; i += 8 {
			archsimd.LoadFloat32x8((*[8]float32)(src[i : i+8])).Sub(cv).Store((*[8]float32)(dst[i : i+8]))
		}
	}
	return i
}

// scaleVector sets x[i] *= c over the whole vectors and returns how many it wrote.
func scaleVector(x []float32, c float32) int {
	n := len(x)
	i := 0
	defer archsimd.ClearAVXUpperBits()
	switch {
	case hasAVX512:
		cv := archsimd.BroadcastFloat32x16(c)
		for ; i+16 <= n; i += 16 {
			archsimd.LoadFloat32x16((*[16]float32)(x[i : i+16])).Mul(cv).Store((*[16]float32)(x[i : i+16]))
		}
	case hasAVX2:
		cv := archsimd.BroadcastFloat32x8(c)
		for ; i+8 <= n; i += 8 {
			archsimd.LoadFloat32x8((*[8]float32)(x[i : i+8])).Mul(cv).Store((*[8]float32)(x[i : i+8]))
		}
	}
	return i
}
