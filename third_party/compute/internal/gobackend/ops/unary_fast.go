// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package ops

import (
	"math"

	"github.com/gomlx/compute/internal/fastmath"
)

// exp32 is e^x in float32 (fastmath.Exp32Exact: Cephes' polynomial in float32 inside [-87, 88], 0
// below e^-104, math.Exp for the rest so ±Inf, subnormals and NaN behave as before).
func exp32(x float32) float32 { return fastmath.Exp32Exact(x) }

// execExpFloat32 runs whole vectors of the polynomial (same bits as exp32 per element).
func execExpFloat32(inputs, outputs []float32) {
	fastmath.Exp32Slice(outputs[:len(inputs)], inputs)
}

// execLogisticFloat32 is 1/(1+e^-x), written so that e^t never overflows (t = -|x| ≤ 0): the
// exponentials run as one vectorised pass, the combination as a second.
func execLogisticFloat32(inputs, outputs []float32) {
	outputs = outputs[:len(inputs)]
	for i, x := range inputs {
		outputs[i] = -abs32(x)
	}
	fastmath.Exp32Slice(outputs, outputs)
	for i, x := range inputs {
		e := outputs[i]
		if x >= 0 {
			outputs[i] = 1 / (1 + e)
		} else {
			outputs[i] = e / (1 + e)
		}
	}
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
