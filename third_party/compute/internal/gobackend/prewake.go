// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package gobackend

import (
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/support/envutil"
)

// prewakeAtStart is false when GOMLX_PREWAKE_START=false (for measurements): then only the nodes
// planPrewake marks wake the helpers.
var prewakeAtStart = envutil.MustReadBool("GOMLX_PREWAKE_START", true)

// prewakeAhead is how many executed nodes ahead of an op that splits its work across the
// backend's workers the sequential executor wakes their parked helpers.
const prewakeAhead = 3

// planPrewake marks the schedule position prewakeAhead executed nodes before each op that usually
// runs on all workers (DotGeneral, the fused attention), or the first node after the previous such
// op when they are closer:
// executing it first wakes the pool's parked helpers (workerspool Pool.Prewake), so that they are
// spinning when the op publishes its work. A helper parks after DefaultSpin without work, and
// waking it takes tens of microseconds on a VM: a decoding step's first projection found it parked
// after the step's serial sampling ops and ran without it for that long (measured: it joined 26 µs
// late on average, against 3–6 µs for the other products). Waking is only a hint: which thread
// computes what does not change results.
//
// wakeAtStart is whether an execution wakes the helpers as it starts: whether the function has an
// executed parallel op at all (unless GOMLX_PREWAKE_START=false). The nodes before a call's first
// such op are not enough warning when the caller ran serially for long between calls (a decoding
// loop samples on the host for ~0.3 ms per step, the helpers park after 50 µs): the first
// projection of 1 step in 6 found the helper parked and ran >50 µs alone (base preset, 6 layers);
// woken at the start, 1 in 60. Then no node before that first op is marked: its wake would find
// the helper woken but not yet spinning and queue a second token, which keeps it spinning another
// DefaultSpin when it next parks (review finding).
func (fe *FunctionExecutable) planPrewake() { fe.planPrewakeWith(prewakeAtStart) }

// planPrewakeWith is planPrewake with the start wake on or off.
func (fe *FunctionExecutable) planPrewakeWith(atStart bool) {
	fe.prewake = make([]bool, len(fe.Schedule))
	fe.wakeAtStart = false
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
	// Only the first of the (up to prewakeAhead) nodes before a parallel op wakes: a woken helper
	// counts as spinning only once it runs, so waking again from the next nodes would queue tokens
	// that each keep a helper spinning another DefaultSpin later.
	marked := false        // the previous executed node was marked
	beforeFirst := atStart // no parallel op executed yet, and the start wakes the helpers
	for pos, idx := range fe.Schedule {
		if !executed(idx) {
			continue
		}
		if parallel(idx) {
			fe.wakeAtStart = atStart
			beforeFirst = false
			marked = false
			continue
		}
		if beforeFirst {
			continue
		}
		seen, wake := 0, false
		for next := pos + 1; next < len(fe.Schedule) && seen < prewakeAhead; next++ {
			j := fe.Schedule[next]
			if !executed(j) {
				continue
			}
			seen++
			if parallel(j) {
				wake = true
				break
			}
		}
		fe.prewake[pos] = wake && !marked
		marked = wake
	}
}
