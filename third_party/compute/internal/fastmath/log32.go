// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fastmath

import "math"

// Log32 is float32(math.Log(float64(x))), bit for bit, for every float32 x (Temper fork: the
// decode attention's log-sum-exp, whose sums lie in [1, keys]).
//
// For x in [1, 2^25) it computes log in float64 from a table instead: x = 2^e·m, m in [1, 2),
// c the centre of m's 1/128 of [1, 2) (1 itself for the first), r = m·(1/c) − 1 (|r| < 1/128,
// the subtraction exact), log x = e·ln2 + log c + log1p(r), log1p by its Taylor series to r⁷:
// relative error below 2^-44. Its float32 rounding is math.Log's unless the float64 result lies
// within 2^15 float64 ulps (2^-38 relative, far more than both errors together) of a point halfway
// between two float32s; then (about one x in 8000) and outside [1, 2^25) it calls math.Log.
// TestLog32 checks every float32 of [1, 2^25).
func Log32(x float32) float32 {
	b := math.Float32bits(x)
	if b-0x3f800000 >= (25 << 23) { // outside [1, 2^25) (negative, NaN and +Inf included)
		return float32(math.Log(float64(x)))
	}
	e := int32(b>>23) - 127
	i := (b >> 16) & 127
	m := float64(math.Float32frombits(b&0x7fffff | 0x3f800000))
	r := m*log32Tab[i].invc - 1
	p := r - r*r*(0.5-r*(1.0/3-r*(0.25-r*(0.2-r*(1.0/6-r*(1.0/7))))))
	y := (float64(e)*math.Ln2 + log32Tab[i].logc) + p
	if d := int64(math.Float64bits(y)&(1<<29-1)) - 1<<28; d < 1<<15 && d > -(1<<15) {
		return float32(math.Log(float64(x)))
	}
	return float32(y)
}

// log32Tab holds, per 1/128 of [1, 2), 1/c for the centre c of the interval (1 for the first)
// and log c = −log(1/c).
var log32Tab = func() (t [128]struct{ invc, logc float64 }) {
	for i := range t {
		if i == 0 {
			t[i].invc = 1
			continue
		}
		t[i].invc = 1 / (1 + (float64(i)+0.5)/128)
		t[i].logc = -math.Log(t[i].invc)
	}
	return t
}()
