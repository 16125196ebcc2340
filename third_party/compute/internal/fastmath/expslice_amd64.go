// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fastmath

import (
	"simd/archsimd"

	"github.com/gomlx/compute/support/envutil"
)

var (
	// Temper fork: GOMLX_SIMD_AVX512=false selects the AVX2 loops on an AVX-512 machine, as it does
	// for matmul, so the AVX2 path can be measured anywhere.
	hasAVX512 = archsimd.X86.AVX512() && envutil.MustReadBool(envutil.SIMD_AVX512_Env, true)
	hasAVX2   = archsimd.X86.AVX2() && envutil.MustReadBool(envutil.SIMD_AVX2_Env, true)
)

// expSliceVector fills dst with e^src in whole vectors (ExpPoly32 lane by lane, in the same float32
// operations) and returns how many elements it wrote. Inputs below e^-104 give 0 in the vector; a
// vector with any other input outside [-87, 88] (or NaN) is done element by element.
func expSliceVector(dst, src []float32) int {
	n := len(src)
	i := 0
	// Go's scalar float code is non-VEX SSE: left with dirty upper vector halves, every later scalar
	// float op pays a dependency on them (measured: the scalar loop after this ran 5x slower).
	defer archsimd.ClearAVXUpperBits()
	switch {
	case hasAVX512:
		log2e, half := archsimd.BroadcastFloat32x16(expLog2E), archsimd.BroadcastFloat32x16(0.5)
		hi, lo := archsimd.BroadcastFloat32x16(expLn2Hi), archsimd.BroadcastFloat32x16(expLn2Lo)
		p7, p6 := archsimd.BroadcastFloat32x16(expP7), archsimd.BroadcastFloat32x16(expP6)
		p5, p4 := archsimd.BroadcastFloat32x16(expP5), archsimd.BroadcastFloat32x16(expP4)
		p3, p2 := archsimd.BroadcastFloat32x16(expP3), archsimd.BroadcastFloat32x16(expP2)
		one, bias := archsimd.BroadcastFloat32x16(1), archsimd.BroadcastInt32x16(127)
		lowest, highest, zeroAt := archsimd.BroadcastFloat32x16(-87), archsimd.BroadcastFloat32x16(88), archsimd.BroadcastFloat32x16(-104)
		const all = 1<<16 - 1
		for ; i+16 <= n; i += 16 {
			x := archsimd.LoadFloat32x16((*[16]float32)(src[i : i+16]))
			inRange := x.GreaterEqual(lowest).And(x.LessEqual(highest))
			if inRange.Or(x.Less(zeroAt)).ToBits() != all {
				// A subnormal, overflowing or NaN input: this vector element by element.
				var tmp [16]float32
				x.Store(&tmp)
				for j, v := range tmp {
					dst[i+j] = Exp32Exact(v)
				}
				continue
			}
			x = x.Max(lowest) // lanes below e^-104 compute a finite value that Masked zeroes
			z := x.Mul(log2e).Add(half).FloorScaled(0)
			g := x.Sub(z.Mul(hi)).Sub(z.Mul(lo))
			p := p7.Mul(g).Add(p6).Mul(g).Add(p5).Mul(g).Add(p4).Mul(g).Add(p3).Mul(g).Add(p2).Mul(g.Mul(g)).Add(g).Add(one)
			scale := z.ConvertToInt32().Add(bias).ShiftAllLeft(23).AsFloat32x16()
			scale.Mul(p).Masked(inRange).Store((*[16]float32)(dst[i : i+16]))
		}
	case hasAVX2:
		log2e, half := archsimd.BroadcastFloat32x8(expLog2E), archsimd.BroadcastFloat32x8(0.5)
		hi, lo := archsimd.BroadcastFloat32x8(expLn2Hi), archsimd.BroadcastFloat32x8(expLn2Lo)
		p7, p6 := archsimd.BroadcastFloat32x8(expP7), archsimd.BroadcastFloat32x8(expP6)
		p5, p4 := archsimd.BroadcastFloat32x8(expP5), archsimd.BroadcastFloat32x8(expP4)
		p3, p2 := archsimd.BroadcastFloat32x8(expP3), archsimd.BroadcastFloat32x8(expP2)
		one, bias := archsimd.BroadcastFloat32x8(1), archsimd.BroadcastInt32x8(127)
		lowest, highest, zeroAt := archsimd.BroadcastFloat32x8(-87), archsimd.BroadcastFloat32x8(88), archsimd.BroadcastFloat32x8(-104)
		const all = 1<<8 - 1
		for ; i+8 <= n; i += 8 {
			x := archsimd.LoadFloat32x8((*[8]float32)(src[i : i+8]))
			inRange := x.GreaterEqual(lowest).And(x.LessEqual(highest))
			if inRange.Or(x.Less(zeroAt)).ToBits() != all {
				// A subnormal, overflowing or NaN input: this vector element by element.
				var tmp [8]float32
				x.Store(&tmp)
				for j, v := range tmp {
					dst[i+j] = Exp32Exact(v)
				}
				continue
			}
			x = x.Max(lowest) // lanes below e^-104 compute a finite value that Masked zeroes
			z := x.Mul(log2e).Add(half).Floor()
			g := x.Sub(z.Mul(hi)).Sub(z.Mul(lo))
			p := p7.Mul(g).Add(p6).Mul(g).Add(p5).Mul(g).Add(p4).Mul(g).Add(p3).Mul(g).Add(p2).Mul(g.Mul(g)).Add(g).Add(one)
			scale := z.ConvertToInt32().Add(bias).ShiftAllLeft(23).AsFloat32x8()
			scale.Mul(p).Masked(inRange).Store((*[8]float32)(dst[i : i+8]))
		}
	}
	return i
}
