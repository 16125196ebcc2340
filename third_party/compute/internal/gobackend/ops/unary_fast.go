// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"math"
	"sync"

	"github.com/gomlx/compute/internal/fastmath"
)

// execExpFloat32 is e^x in float32 (fastmath.Exp32Slice: Cephes' polynomial in float32 inside
// [-87, 88], 0 below e^-104, math.Exp for the rest so ±Inf, subnormals and NaN behave as before).
func execExpFloat32(inputs, outputs []float32) {
	fastmath.Exp32Slice(outputs[:len(inputs)], inputs)
}

// execLogisticFloat32 is 1/(1+e^-x), written so that e^t never overflows (t = -|x| ≤ 0): the
// exponentials of a block run as one vectorised pass into a scratch buffer, then the combination;
// outputs may alias inputs (each x is read before its result is written).
func execLogisticFloat32(inputs, outputs []float32) {
	outputs = outputs[:len(inputs)]
	scratch := logisticScratch.Get().(*[512]float32)
	defer logisticScratch.Put(scratch)
	for lo := 0; lo < len(inputs); lo += len(scratch) {
		in := inputs[lo:min(lo+len(scratch), len(inputs))]
		e := scratch[:len(in)]
		negAbsKernel(in, e)
		fastmath.Exp32Slice(e, e)
		logisticCombineKernel(in, e, outputs[lo:lo+len(in)])
	}
}

var logisticScratch = sync.Pool{New: func() any { return new([512]float32) }}

// negAbsKernel and logisticCombineKernel are the scalar loops below unless a vector ISA replaces
// them (unary_simd_amd64.go): the vector versions give the same bits (sign-bit set; IEEE add and
// divide), and the scalar combine's data-dependent branch mispredicted on every other element.
var (
	negAbsKernel          = negAbs
	logisticCombineKernel = logisticCombine
)

func negAbs(in, out []float32) {
	out = out[:len(in)]
	for i, x := range in {
		out[i] = -abs32(x)
	}
}

// logisticCombine: out = 1/(1+e) where x ≥ 0, e/(1+e) elsewhere (e = e^-|x|).
func logisticCombine(in, e, out []float32) {
	e, out = e[:len(in)], out[:len(in)]
	for i, x := range in {
		if x >= 0 {
			out[i] = 1 / (1 + e[i])
		} else {
			out[i] = e[i] / (1 + e[i])
		}
	}
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// execSqrtFloat32 is the float32 square root: sqrtKernel, the scalar float64 loop unless a vector
// ISA replaces it (unary_simd_amd64.go). Both are correctly rounded: float32(√x computed in
// float64) is the correctly rounded float32 √x (53 ≥ 2·24 + 2 bits), and so is VSQRTPS, so every
// element has the same bits either way (TestSqrtKernelMatchesScalar).
func execSqrtFloat32(inputs, outputs []float32) { sqrtKernel(inputs, outputs[:len(inputs)]) }

var sqrtKernel = execSqrtGeneric[float32]
