// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fusedops

import (
	"simd/archsimd"
	"unsafe"

	"github.com/gomlx/compute/internal/fastmath"
	"github.com/gomlx/compute/support/envutil"
)

// The decode attention's scores and weighted sum of values with AVX-512 (Temper fork:
// decodeattn.go), in assembly (decodescores512_amd64.s, decodeaccum512_amd64.s). Scores: eight
// keys at a time against all two or three query rows of the group, two keys per zmm accumulator.
// Values: each visible value row is read once, whole (head_dim 32 or 64: two or four 16-float
// registers), for all the rows, in increasing key order, so a head's rows stream from memory in
// address order; the rows of output stay in registers (the Go loop spilled them: the compiler
// allocates sixteen vector registers). Each score is vecDot's eight lanes and tree and each output
// element vecAxpy's chain (products rounded, then added: no fused multiply-add), so the bits do not
// change. archsimd.X86.AVX512 includes AVX512DQ (VINSERTF32X8, VBROADCASTF32X8).
var vecAVX512 = vecAVX2 && archsimd.X86.AVX512() && envutil.MustReadBool(envutil.SIMD_AVX512_Env, true)

// groupAccumulate512 is groupAccumulateVector for head_dim 32 or 64 and two or three query rows on
// AVX-512 (decodeaccum512_amd64.s); false when it does not apply. The caller
// (groupAccumulateVector) has checked that every visible value row lies inside values.
func groupAccumulate512(o, p []float32, nr int, values []float32, vis []int32) bool {
	d := len(o) / max(nr, 1)
	n := len(vis)
	if !vecAVX512 || (nr != 2 && nr != 3) || (d != 32 && d != 64) || len(o) != nr*d || len(p) < nr*n {
		return false
	}
	if n == 0 {
		return true
	}
	op, pp, vp, ip := unsafe.SliceData(o), unsafe.SliceData(p), unsafe.SliceData(values), unsafe.SliceData(vis)
	switch { // direct calls: see scores512
	case nr == 3 && d == 64:
		accum3x64Asm(op, pp, n, vp, ip, n)
	case nr == 2 && d == 64:
		accum2x64Asm(op, pp, n, vp, ip, n)
	case nr == 3:
		accum3x32Asm(op, pp, n, vp, ip, n)
	default:
		accum2x32Asm(op, pp, n, vp, ip, n)
	}
	return true
}

// The kernels of groupAccumulate512: o [nr, d] += Σ_t p[r·ldp + t]·(value row vis[t]), t in
// increasing order (decodeaccum512_amd64.s); the caller checks that every row vis[t] lies inside
// values and that o and p are large enough.

//go:noescape
func accum3x64Asm(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)

//go:noescape
func accum2x64Asm(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)

//go:noescape
func accum3x32Asm(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)

//go:noescape
func accum2x32Asm(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)

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
	kp, qp := unsafe.SliceData(keys), unsafe.SliceData(q)
	m := n &^ 7
	if m > 0 {
		scores512(nr, d, unsafe.SliceData(sc), n, qp, kp, unsafe.SliceData(vis), m)
	}
	if m < n {
		var tv [8]int32
		var ts [3 * 8]float32
		last := copy(tv[:], vis[m:])
		for i := last; i < 8; i++ {
			tv[i] = vis[n-1]
		}
		scores512(nr, d, &ts[0], 8, qp, kp, &tv[0], 8)
		for r := range nr {
			copy(sc[r*n+m:(r+1)*n], ts[r*8:r*8+last])
		}
	}
	return true
}

// scores512 calls the kernel of nr rows and head_dim d directly (through a func value the
// compiler would not see //go:noescape, and the tail's scratch would go to the heap).
func scores512(nr, d int, sc *float32, ldsc int, q, keys *float32, vis *int32, n int) {
	switch {
	case nr == 3 && d == 64:
		scores3x64Asm(sc, ldsc, q, keys, vis, n)
	case nr == 2 && d == 64:
		scores2x64Asm(sc, ldsc, q, keys, vis, n)
	case nr == 3:
		scores3x32Asm(sc, ldsc, q, keys, vis, n)
	default:
		scores2x32Asm(sc, ldsc, q, keys, vis, n)
	}
}

// decodeSoftmax512 is decodeSoftmaxVector on AVX-512: the softmax of decodeRows for the nr rows
// sc [nr, n] (n > 0) together, in fewer passes than vecScaleMax, vecSubScalar, Exp32Slice and
// vecSum row by row, with the same float32 operations in the same order, so the same bits:
//
//   - with scaleMax: scale and maximum as vecScaleMax (eight lanes of VMAXPS in its order, the
//     lanes then the tail by the same scalar compares) into mx; else mx holds the maxima;
//   - e^(x − max) as vecSubScalar then Exp32Slice (ExpPoly32 lane by lane, Exp32Exact for a
//     vector with an input outside [-87, 88] other than below −104), 16 at a time, the last
//     (fewer than 16) by a masked vector, stored over the scores;
//   - the sum as vecSum: eight running lanes over the whole vectors of eight (the low then the
//     high half of each 16), the same tree, then the tail in order, into sums.
//
// The vector passes run for all the rows, then the scalar reductions (after clearing the upper
// vector bits: Go's scalar float code is non-VEX SSE, which waits on dirty upper halves).
func decodeSoftmax512(sc []float32, nr, n int, scale float32, scaleMax bool, mx, sums *[decodeGroup]float32) bool {
	if !vecAVX512 || nr < 1 || nr > decodeGroup || n <= 0 || len(sc) < nr*n {
		return false
	}
	sc = sc[:nr*n]
	base := unsafe.Pointer(unsafe.SliceData(sc))
	n8, n16 := n&^7, n&^15
	rowBytes := uintptr(n) * 4
	var lanes [decodeGroup][8]float32
	if scaleMax {
		if n8 > 0 {
			cv := bc(scale)
			for r := range nr {
				row := unsafe.Add(base, uintptr(r)*rowBytes)
				acc := bc(negInf)
				for off := uintptr(0); off < uintptr(n8)*4; off += 32 {
					y := ldp(row, off).Mul(cv)
					stp(y, row, off)
					acc = acc.Max(y)
				}
				acc.Store(&lanes[r])
			}
			archsimd.ClearAVXUpperBits()
		}
		for r := range nr {
			m := negInf
			if n8 > 0 {
				for _, v := range lanes[r] {
					if v > m {
						m = v
					}
				}
			}
			row := sc[r*n : (r+1)*n]
			for i := n8; i < len(row); i++ {
				row[i] *= scale
				if row[i] > m {
					m = row[i]
				}
			}
			mx[r] = m
		}
	}
	log2e, half := archsimd.BroadcastFloat32x16(fastmath.ExpLog2E), archsimd.BroadcastFloat32x16(0.5)
	hi, lo := archsimd.BroadcastFloat32x16(fastmath.ExpLn2Hi), archsimd.BroadcastFloat32x16(fastmath.ExpLn2Lo)
	p7, p6 := archsimd.BroadcastFloat32x16(fastmath.ExpP7), archsimd.BroadcastFloat32x16(fastmath.ExpP6)
	p5, p4 := archsimd.BroadcastFloat32x16(fastmath.ExpP5), archsimd.BroadcastFloat32x16(fastmath.ExpP4)
	p3, p2 := archsimd.BroadcastFloat32x16(fastmath.ExpP3), archsimd.BroadcastFloat32x16(fastmath.ExpP2)
	one, bias := archsimd.BroadcastFloat32x16(1), archsimd.BroadcastInt32x16(127)
	lowest, highest, zeroAt := archsimd.BroadcastFloat32x16(-87), archsimd.BroadcastFloat32x16(88), archsimd.BroadcastFloat32x16(-104)
	const all = 1<<16 - 1
	chunks := (n + 15) / 16
	var tail [16]float32 // the last n − n16 scores of a row, then copies of its max (e^0)
	for r := range nr {
		row := unsafe.Add(base, uintptr(r)*rowBytes)
		mv := archsimd.BroadcastFloat32x16(mx[r])
		if n16 < n {
			mv.Store(&tail)
			copy(tail[:], sc[r*n+n16:(r+1)*n])
		}
		acc := bc(0)
		for c := range chunks {
			p := &tail
			if c*16 < n16 {
				p = (*[16]float32)(unsafe.Add(row, uintptr(c)*64))
			}
			x := archsimd.LoadFloat32x16(p).Sub(mv)
			inRange := x.GreaterEqual(lowest).ToBits() & x.LessEqual(highest).ToBits()
			var e archsimd.Float32x16
			if inRange|x.Less(zeroAt).ToBits() != all {
				// A subnormal, overflowing or NaN input: this vector element by element.
				var tmp [16]float32
				x.Store(&tmp)
				for j, v := range tmp {
					tmp[j] = fastmath.Exp32Exact(v)
				}
				e = archsimd.LoadFloat32x16(&tmp)
			} else {
				x = x.Max(lowest) // lanes below e^-104 compute a finite value that Masked zeroes
				z := x.Mul(log2e).Add(half).FloorScaled(0)
				g := x.Sub(z.Mul(hi)).Sub(z.Mul(lo))
				q := p7.Mul(g).Add(p6).Mul(g).Add(p5).Mul(g).Add(p4).Mul(g).Add(p3).Mul(g).Add(p2).Mul(g.Mul(g)).Add(g).Add(one)
				scale := z.ConvertToInt32().Add(bias).ShiftAllLeft(23).AsFloat32x16()
				e = scale.Mul(q).Masked(archsimd.Mask32x16FromBits(inRange))
			}
			e.Store(p)
			if p != &tail {
				acc = acc.Add(e.GetLo()).Add(e.GetHi())
			} else if n-n16 >= 8 {
				acc = acc.Add(e.GetLo())
			}
		}
		acc.Store(&lanes[r])
		if n16 < n {
			copy(sc[r*n+n16:(r+1)*n], tail[:])
		}
	}
	archsimd.ClearAVXUpperBits()
	for r := range nr {
		l := &lanes[r]
		s := ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
		row := sc[r*n : (r+1)*n]
		for i := n8; i < len(row); i++ {
			s += row[i]
		}
		sums[r] = s
	}
	return true
}

// decodeDiv512 is decodeDivVector on AVX-512: row r of o [nr, d] divided by sums[r], 16 at a
// time (each element x/c as vecDiv's, so the same bits).
func decodeDiv512(o []float32, nr int, sums *[decodeGroup]float32) bool {
	d := len(o) / max(nr, 1)
	if !vecAVX512 || nr < 1 || nr > decodeGroup || d%16 != 0 || len(o) != nr*d {
		return false
	}
	op := unsafe.Pointer(unsafe.SliceData(o))
	db := uintptr(d) * 4
	for r := range nr {
		c := archsimd.BroadcastFloat32x16(sums[r])
		row := unsafe.Add(op, uintptr(r)*db)
		for off := uintptr(0); off < db; off += 64 {
			p := (*[16]float32)(unsafe.Add(row, off))
			archsimd.LoadFloat32x16(p).Div(c).Store(p)
		}
	}
	archsimd.ClearAVXUpperBits()
	return true
}
