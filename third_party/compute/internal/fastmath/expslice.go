// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fastmath

import "math"

// Exp32Slice sets dst[i] = e^src[i] (len(dst) == len(src); dst may alias src).
//
// Inside [-87, 88] every element gets ExpPoly32, computed with AVX-512 or AVX2 vectors where the
// machine has them and with the same float32 operations (no fused multiply-add) on the scalar
// tail, so a value's result does not depend on its position or on the vector width. Outside that
// range (and for NaN) it falls back to ExpEdge32: +Inf on overflow, subnormals, 0, NaN.
func Exp32Slice(dst, src []float32) {
	dst = dst[:len(src)]
	i := expSliceVector(dst, src)
	for ; i < len(src); i++ {
		dst[i] = Exp32Exact(src[i])
	}
}

// Exp32Exact is the scalar twin of Exp32Slice's elements.
func Exp32Exact(x float32) float32 {
	if x >= -87 && x <= 88 {
		return ExpPoly32(x)
	}
	return ExpEdge32(x)
}

// ExpEdge32 is e^x for x outside [-87, 88] or NaN.
func ExpEdge32(x float32) float32 {
	if x < -104 {
		return 0
	}
	return float32(math.Exp(float64(x)))
}

// Cephes expf constants (see Exp32).
const (
	expLog2E = float32(1.44269504088896341)
	expLn2Hi = float32(0.693359375)
	expLn2Lo = float32(-2.12194440e-4)
	expP7    = float32(1.9875691500e-4)
	expP6    = float32(1.3981999507e-3)
	expP5    = float32(8.3334519073e-3)
	expP4    = float32(4.1665795894e-2)
	expP3    = float32(1.6666665459e-1)
	expP2    = float32(5.0000001201e-1)
)

// The constants of ExpPoly32, for vector loops outside this package that compute it lane by lane
// (Temper fork: the decode attention's softmax, fusedops/flashvec512_amd64.go).
const (
	ExpLog2E = expLog2E
	ExpLn2Hi = expLn2Hi
	ExpLn2Lo = expLn2Lo
	ExpP7    = expP7
	ExpP6    = expP6
	ExpP5    = expP5
	ExpP4    = expP4
	ExpP3    = expP3
	ExpP2    = expP2
)

// ExpPoly32 is Cephes' expf for x in [-87, 88], in float32 arithmetic throughout (relative error
// below 2e-7): n = floor(x·log2e + 1/2), g = x − n·ln2 (split), e^g by a degree-7 polynomial,
// scaled by 2^n through the exponent bits.
func ExpPoly32(x float32) float32 {
	t := x*expLog2E + 0.5
	z := float32(math.Floor(float64(t)))
	g := x - z*expLn2Hi - z*expLn2Lo
	p := (((((expP7*g+expP6)*g+expP5)*g+expP4)*g+expP3)*g+expP2)*(g*g) + g + 1
	return math.Float32frombits(uint32(int32(z)+127)<<23) * p
}
