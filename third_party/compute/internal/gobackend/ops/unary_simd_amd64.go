// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md. AVX-512 / AVX2 loops of the logistic's sign handling:
// bit-identical to negAbs and logisticCombine (setting the sign bit is exact, and 1/(1+e) and
// e/(1+e) are the same IEEE operations lane by lane); and of the float32 square root.

//go:build amd64 && goexperiment.simd

package ops

import (
	"simd/archsimd"

	"github.com/gomlx/compute/support/envutil"
)

func init() {
	switch {
	case archsimd.X86.AVX512() && envutil.MustReadBool(envutil.SIMD_AVX512_Env, true): // GOMLX_SIMD_AVX512=false: AVX2 loops
		negAbsKernel, logisticCombineKernel = negAbs512, logisticCombine512
		sqrtKernel = sqrt512
	case archsimd.X86.AVX2() && envutil.MustReadBool(envutil.SIMD_AVX2_Env, true):
		negAbsKernel, logisticCombineKernel = negAbs256, logisticCombine256
		sqrtKernel = sqrt256
	}
}

const signBit = -1 << 31

func negAbs512(in, out []float32) {
	n := len(in)
	out = out[:n]
	defer archsimd.ClearAVXUpperBits()
	sign := archsimd.BroadcastInt32x16(signBit)
	i := 0
	for ; i+16 <= n; i += 16 {
		archsimd.LoadFloat32x16((*[16]float32)(in[i : i+16])).AsInt32x16().Or(sign).AsFloat32x16().Store((*[16]float32)(out[i : i+16]))
	}
	negAbs(in[i:], out[i:])
}

func logisticCombine512(in, e, out []float32) {
	n := len(in)
	e, out = e[:n], out[:n]
	defer archsimd.ClearAVXUpperBits()
	one, zero := archsimd.BroadcastFloat32x16(1), archsimd.BroadcastFloat32x16(0)
	i := 0
	for ; i+16 <= n; i += 16 {
		x := archsimd.LoadFloat32x16((*[16]float32)(in[i : i+16]))
		ev := archsimd.LoadFloat32x16((*[16]float32)(e[i : i+16]))
		num := one.Merge(ev, x.GreaterEqual(zero))
		num.Div(one.Add(ev)).Store((*[16]float32)(out[i : i+16]))
	}
	logisticCombine(in[i:], e[i:], out[i:])
}

func negAbs256(in, out []float32) {
	n := len(in)
	out = out[:n]
	defer archsimd.ClearAVXUpperBits()
	sign := archsimd.BroadcastInt32x8(signBit)
	i := 0
	for ; i+8 <= n; i += 8 {
		archsimd.LoadFloat32x8((*[8]float32)(in[i : i+8])).AsInt32x8().Or(sign).AsFloat32x8().Store((*[8]float32)(out[i : i+8]))
	}
	negAbs(in[i:], out[i:])
}

func logisticCombine256(in, e, out []float32) {
	n := len(in)
	e, out = e[:n], out[:n]
	defer archsimd.ClearAVXUpperBits()
	one, zero := archsimd.BroadcastFloat32x8(1), archsimd.BroadcastFloat32x8(0)
	i := 0
	for ; i+8 <= n; i += 8 {
		x := archsimd.LoadFloat32x8((*[8]float32)(in[i : i+8]))
		ev := archsimd.LoadFloat32x8((*[8]float32)(e[i : i+8]))
		num := one.Merge(ev, x.GreaterEqual(zero))
		num.Div(one.Add(ev)).Store((*[8]float32)(out[i : i+8]))
	}
	logisticCombine(in[i:], e[i:], out[i:])
}

// sqrt512 and sqrt256 are VSQRTPS: correctly rounded, the bits of execSqrtGeneric[float32].
func sqrt512(in, out []float32) {
	n := len(in)
	out = out[:n]
	defer archsimd.ClearAVXUpperBits()
	i := 0
	for ; i+16 <= n; i += 16 {
		archsimd.LoadFloat32x16((*[16]float32)(in[i : i+16])).Sqrt().Store((*[16]float32)(out[i : i+16]))
	}
	execSqrtGeneric(in[i:], out[i:])
}

func sqrt256(in, out []float32) {
	n := len(in)
	out = out[:n]
	defer archsimd.ClearAVXUpperBits()
	i := 0
	for ; i+8 <= n; i += 8 {
		archsimd.LoadFloat32x8((*[8]float32)(in[i : i+8])).Sqrt().Store((*[8]float32)(out[i : i+8]))
	}
	execSqrtGeneric(in[i:], out[i:])
}
