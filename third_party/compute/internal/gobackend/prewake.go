// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package gobackend

import "github.com/gomlx/compute"

// prewakeAhead is how many executed nodes ahead of an op that splits its work across the
// backend's workers the sequential executor wakes their parked helpers.
const prewakeAhead = 3

// planPrewake marks the schedule positions a few executed nodes before each op that usually runs
// on all workers (DotGeneral, the fused attention), when the node there is not such an op itself:
// executing it first wakes the pool's parked helpers (workerspool Pool.Prewake), so that they are
// spinning when the op publishes its work. A helper parks after DefaultSpin without work, and
// waking it takes tens of microseconds on a VM: a decoding step's first projection found it parked
// after the step's serial sampling ops and ran without it for that long (measured: it joined 26 µs
// late on average, against 3–6 µs for the other products). Waking is only a hint: which thread
// computes what does not change results.
func (fe *FunctionExecutable) planPrewake() {
	fe.prewake = make([]bool, len(fe.Schedule))
	parallel := func(idx int) bool {
		switch fe.Function.Nodes[idx].OpType {
		case compute.OpTypeDotGeneral, compute.OpTypeFusedScaledDotProductAttention:
			return true
		}
		return false
	}
	executed := func(idx int) bool {
		op := fe.Function.Nodes[idx].OpType
		return fe.NumUses[idx] > 0 && op != compute.OpTypeParameter && op != compute.OpTypeConstant
	}
	for pos, idx := range fe.Schedule {
		if !executed(idx) || parallel(idx) {
			continue
		}
		seen := 0
		for next := pos + 1; next < len(fe.Schedule) && seen < prewakeAhead; next++ {
			j := fe.Schedule[next]
			if !executed(j) {
				continue
			}
			seen++
			if parallel(j) {
				fe.prewake[pos] = true
				break
			}
		}
	}
}
