// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package gobackend

import (
	"slices"
	"testing"

	"github.com/gomlx/compute"
)

// TestPlanPrewake: the executor wakes the workers' helpers once before each DotGeneral or fused
// attention, at the first of the (up to three) executed nodes before it, never at the parallel ops
// themselves, skipping parameters, constants and unused nodes when counting; and as each execution
// starts when the function has an executed parallel op.
func TestPlanPrewake(t *testing.T) {
	P, C, D := compute.OpTypeParameter, compute.OpTypeConstant, compute.OpTypeDotGeneral
	A, N, E := compute.OpTypeFusedScaledDotProductAttention, compute.OpTypeNeg, compute.OpTypeExp
	for _, tc := range []struct {
		name   string
		ops    []compute.OpType
		unused []int
		want   []bool
		start  bool // wakeAtStart
	}{
		{"three before", []compute.OpType{P, N, E, N, N, D}, nil, []bool{false, false, true, false, false, false}, true},
		{"parameters and constants not counted", []compute.OpType{N, P, C, E, D}, nil, []bool{true, false, false, false, false}, true},
		{"unused node not counted", []compute.OpType{N, E, N, E, A}, []int{2}, []bool{true, false, false, false, false}, true},
		{"parallel ops back to back", []compute.OpType{D, A, N, D}, nil, []bool{false, false, true, false}, true},
		{"again after a parallel op", []compute.OpType{N, D, N, N, N, N, A}, nil, []bool{true, false, false, true, false, false, false}, true},
		{"none", []compute.OpType{P, N, E, N}, nil, []bool{false, false, false, false}, false},
		{"parallel op unused", []compute.OpType{P, N, D, N}, []int{2}, []bool{false, false, false, false}, false},
	} {
		fe := &FunctionExecutable{Function: &Function{}}
		for i, op := range tc.ops {
			fe.Function.Nodes = append(fe.Function.Nodes, &Node{OpType: op})
			fe.Schedule = append(fe.Schedule, i)
			uses := 1
			if slices.Contains(tc.unused, i) {
				uses = 0
			}
			fe.NumUses = append(fe.NumUses, uses)
		}
		fe.planPrewake()
		if !slices.Equal(fe.prewake, tc.want) {
			t.Errorf("%s: prewake %v, want %v", tc.name, fe.prewake, tc.want)
		}
		if fe.wakeAtStart != tc.start {
			t.Errorf("%s: wakeAtStart %v, want %v", tc.name, fe.wakeAtStart, tc.start)
		}
	}
}
