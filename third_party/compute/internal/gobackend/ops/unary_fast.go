// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"math"

	"github.com/gomlx/compute/internal/fastmath"
)

// exp32 is e^x in float32: fastmath's polynomial (relative error < 1e-7) inside the range where
// it applies; below e^-104 the float32 result is 0 (masked attention scores land there by the
// million, so this must be cheap); the subnormal band, overflow (+Inf) and NaN go to math.Exp.
func exp32(x float32) float32 {
	if x >= -87 && x <= 88 {
		return fastmath.Exp32(x)
	}
	if x < -104 {
		return 0
	}
	return float32(math.Exp(float64(x)))
}

func execExpFloat32(inputs, outputs []float32) {
	outputs = outputs[:len(inputs)]
	for i, x := range inputs {
		outputs[i] = exp32(x)
	}
}

// execLogisticFloat32 is 1/(1+e^-x), written so that e^t never overflows (t ≤ 0).
func execLogisticFloat32(inputs, outputs []float32) {
	outputs = outputs[:len(inputs)]
	for i, x := range inputs {
		if x >= 0 {
			outputs[i] = 1 / (1 + exp32(-x))
		} else {
			e := exp32(x)
			outputs[i] = e / (1 + e)
		}
	}
}
