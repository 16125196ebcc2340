// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fusedops

import (
	"simd/archsimd"
	"unsafe"

	"github.com/gomlx/compute/support/envutil"
)

// The decode attention's weighted sum of values with AVX-512 (Temper fork: decodeattn.go): each
// visible value row is read once, whole (head_dim 32 or 64: two or four 16-float registers), for
// all two or three query rows of the group, in increasing key order, so a head's rows stream from
// memory in address order. The AVX2 loop keeps 16 columns of the rows in registers and walks the
// value rows once per 16 columns: four strided passes at head_dim 64, which the hardware
// prefetchers do not follow. Each output element is the same chain as vecAxpy's (the product
// rounded, then added, in key order), so the bits do not change.
var vecAVX512 = vecAVX2 && archsimd.X86.AVX512() && envutil.MustReadBool(envutil.SIMD_AVX512_Env, true)

type v16 = archsimd.Float32x16

func ldp16(p unsafe.Pointer, off uintptr) v16 {
	return archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(p, off)))
}

func stp16(v v16, p unsafe.Pointer, off uintptr) { v.Store((*[16]float32)(unsafe.Add(p, off))) }

func bc16(c float32) v16 { return archsimd.BroadcastFloat32x16(c) }

// groupAccumulate512 is groupAccumulateVector for head_dim 32 or 64 and two or three query rows on
// AVX-512; false when it does not apply.
func groupAccumulate512(o, p []float32, nr int, values []float32, vis []int32) bool {
	d := len(o) / max(nr, 1)
	n := len(vis)
	if !vecAVX512 || (nr != 2 && nr != 3) || (d != 32 && d != 64) || len(o) != nr*d || len(p) < nr*n || !rowsInside(values, d, vis) {
		return false
	}
	defer archsimd.ClearAVXUpperBits()
	vb := unsafe.Pointer(unsafe.SliceData(values))
	o0 := unsafe.Pointer(unsafe.SliceData(o))
	db := uintptr(d) * 4
	o1 := unsafe.Add(o0, db)
	p0, p1 := p[:n], p[n:2*n]
	switch {
	case d == 64 && nr == 3:
		o2 := unsafe.Add(o0, 2*db)
		p2 := p[2*n : 3*n]
		a00, a01, a02, a03 := ldp16(o0, 0), ldp16(o0, 64), ldp16(o0, 128), ldp16(o0, 192)
		a10, a11, a12, a13 := ldp16(o1, 0), ldp16(o1, 64), ldp16(o1, 128), ldp16(o1, 192)
		a20, a21, a22, a23 := ldp16(o2, 0), ldp16(o2, 64), ldp16(o2, 128), ldp16(o2, 192)
		for t, j := range vis {
			v := unsafe.Add(vb, uintptr(j)*db)
			x0, x1, x2, x3 := ldp16(v, 0), ldp16(v, 64), ldp16(v, 128), ldp16(v, 192)
			w := bc16(p0[t])
			a00, a01, a02, a03 = a00.Add(x0.Mul(w)), a01.Add(x1.Mul(w)), a02.Add(x2.Mul(w)), a03.Add(x3.Mul(w))
			w = bc16(p1[t])
			a10, a11, a12, a13 = a10.Add(x0.Mul(w)), a11.Add(x1.Mul(w)), a12.Add(x2.Mul(w)), a13.Add(x3.Mul(w))
			w = bc16(p2[t])
			a20, a21, a22, a23 = a20.Add(x0.Mul(w)), a21.Add(x1.Mul(w)), a22.Add(x2.Mul(w)), a23.Add(x3.Mul(w))
		}
		stp16(a00, o0, 0)
		stp16(a01, o0, 64)
		stp16(a02, o0, 128)
		stp16(a03, o0, 192)
		stp16(a10, o1, 0)
		stp16(a11, o1, 64)
		stp16(a12, o1, 128)
		stp16(a13, o1, 192)
		stp16(a20, o2, 0)
		stp16(a21, o2, 64)
		stp16(a22, o2, 128)
		stp16(a23, o2, 192)
	case d == 64: // nr == 2
		a00, a01, a02, a03 := ldp16(o0, 0), ldp16(o0, 64), ldp16(o0, 128), ldp16(o0, 192)
		a10, a11, a12, a13 := ldp16(o1, 0), ldp16(o1, 64), ldp16(o1, 128), ldp16(o1, 192)
		for t, j := range vis {
			v := unsafe.Add(vb, uintptr(j)*db)
			x0, x1, x2, x3 := ldp16(v, 0), ldp16(v, 64), ldp16(v, 128), ldp16(v, 192)
			w := bc16(p0[t])
			a00, a01, a02, a03 = a00.Add(x0.Mul(w)), a01.Add(x1.Mul(w)), a02.Add(x2.Mul(w)), a03.Add(x3.Mul(w))
			w = bc16(p1[t])
			a10, a11, a12, a13 = a10.Add(x0.Mul(w)), a11.Add(x1.Mul(w)), a12.Add(x2.Mul(w)), a13.Add(x3.Mul(w))
		}
		stp16(a00, o0, 0)
		stp16(a01, o0, 64)
		stp16(a02, o0, 128)
		stp16(a03, o0, 192)
		stp16(a10, o1, 0)
		stp16(a11, o1, 64)
		stp16(a12, o1, 128)
		stp16(a13, o1, 192)
	case nr == 3: // d == 32
		o2 := unsafe.Add(o0, 2*db)
		p2 := p[2*n : 3*n]
		a00, a01, a10, a11, a20, a21 := ldp16(o0, 0), ldp16(o0, 64), ldp16(o1, 0), ldp16(o1, 64), ldp16(o2, 0), ldp16(o2, 64)
		for t, j := range vis {
			v := unsafe.Add(vb, uintptr(j)*db)
			x0, x1 := ldp16(v, 0), ldp16(v, 64)
			w := bc16(p0[t])
			a00, a01 = a00.Add(x0.Mul(w)), a01.Add(x1.Mul(w))
			w = bc16(p1[t])
			a10, a11 = a10.Add(x0.Mul(w)), a11.Add(x1.Mul(w))
			w = bc16(p2[t])
			a20, a21 = a20.Add(x0.Mul(w)), a21.Add(x1.Mul(w))
		}
		stp16(a00, o0, 0)
		stp16(a01, o0, 64)
		stp16(a10, o1, 0)
		stp16(a11, o1, 64)
		stp16(a20, o2, 0)
		stp16(a21, o2, 64)
	default: // d == 32, nr == 2
		a00, a01, a10, a11 := ldp16(o0, 0), ldp16(o0, 64), ldp16(o1, 0), ldp16(o1, 64)
		for t, j := range vis {
			v := unsafe.Add(vb, uintptr(j)*db)
			x0, x1 := ldp16(v, 0), ldp16(v, 64)
			w := bc16(p0[t])
			a00, a01 = a00.Add(x0.Mul(w)), a01.Add(x1.Mul(w))
			w = bc16(p1[t])
			a10, a11 = a10.Add(x0.Mul(w)), a11.Add(x1.Mul(w))
		}
		stp16(a00, o0, 0)
		stp16(a01, o0, 64)
		stp16(a10, o1, 0)
		stp16(a11, o1, 64)
	}
	return true
}

// The decode attention's scores with AVX-512 (decodescores512_amd64.s): eight keys at a time
// against all two or three query rows of the group, two keys per zmm accumulator, every key row
// read once for the rows. Each score is vecDot's eight lanes of rounded products (a VMULPS then a
// VADDPS per chunk, no fused multiply-add) and vecDot's tree, so the bits are the scalar loop's.
// sc[r·ldsc + t] for t < n (a multiple of 8); the caller checks that every row vis[t] of keys lies
// inside keys and that sc and q are large enough.

//go:noescape
func scores3x64Asm(sc *float32, ldsc int, q *float32, keys *float32, vis *int32, n int)

//go:noescape
func scores2x64Asm(sc *float32, ldsc int, q *float32, keys *float32, vis *int32, n int)

//go:noescape
func scores3x32Asm(sc *float32, ldsc int, q *float32, keys *float32, vis *int32, n int)

//go:noescape
func scores2x32Asm(sc *float32, ldsc int, q *float32, keys *float32, vis *int32, n int)

// groupScores512 is groupScoresVector for two or three query rows of head_dim 32 or 64 on
// AVX-512; false when it does not apply. The caller (groupScoresVector) has checked that q is
// [nr, d], that sc holds nr·len(vis) scores and that every visible key row lies inside keys. The
// last keys (fewer than eight) go through the same kernel as a block of eight whose missing keys
// repeat the last one, into scratch.
func groupScores512(sc, q []float32, nr int, keys []float32, vis []int32) bool {
	d, n := len(q)/max(nr, 1), len(vis)
	if !vecAVX512 || (nr != 2 && nr != 3) || (d != 32 && d != 64) || len(q) != nr*d || len(sc) < nr*n || n == 0 {
		return false
	}
	kernel := scores2x32Asm
	switch {
	case nr == 3 && d == 64:
		kernel = scores3x64Asm
	case nr == 2 && d == 64:
		kernel = scores2x64Asm
	case nr == 3:
		kernel = scores3x32Asm
	}
	kp, qp := unsafe.SliceData(keys), unsafe.SliceData(q)
	m := n &^ 7
	if m > 0 {
		kernel(unsafe.SliceData(sc), n, qp, kp, unsafe.SliceData(vis), m)
	}
	if m < n {
		var tv [8]int32
		var ts [3 * 8]float32
		last := copy(tv[:], vis[m:])
		for i := last; i < 8; i++ {
			tv[i] = vis[n-1]
		}
		kernel(&ts[0], 8, qp, kp, &tv[0], 8)
		for r := range nr {
			copy(sc[r*n+m:(r+1)*n], ts[r*8:r*8+last])
		}
	}
	return true
}
