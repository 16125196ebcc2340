// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fusedops

import (
	"simd/archsimd"
	"unsafe"

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
