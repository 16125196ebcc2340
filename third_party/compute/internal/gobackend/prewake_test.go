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
// themselves, skipping parameters, constants and unused nodes when counting. With the start wake
// (the default), an execution of a function with an executed parallel op wakes them as it starts,
// and no node before the first such op wakes them again (a second token would keep a helper
// spinning later).
func TestPlanPrewake(t *testing.T) {
	P, C, D := compute.OpTypeParameter, compute.OpTypeConstant, compute.OpTypeDotGeneral
	A, N, E := compute.OpTypeFusedScaledDotProductAttention, compute.OpTypeNeg, compute.OpTypeExp
	F, T := false, true
	for _, tc := range []struct {
		name      string
		ops       []compute.OpType
		unused    []int
		noStart   []bool // marks without the start wake
		withStart []bool // marks with it
		parallel  bool   // an executed parallel op: wakeAtStart with the start wake
	}{
		{"three before", []compute.OpType{P, N, E, N, N, D}, nil, []bool{F, F, T, F, F, F}, []bool{F, F, F, F, F, F}, true},
		{"parameters and constants not counted", []compute.OpType{N, P, C, E, D}, nil, []bool{T, F, F, F, F}, []bool{F, F, F, F, F}, true},
		{"unused node not counted", []compute.OpType{N, E, N, E, A}, []int{2}, []bool{T, F, F, F, F}, []bool{F, F, F, F, F}, true},
		{"parallel ops back to back", []compute.OpType{D, A, N, D}, nil, []bool{F, F, T, F}, []bool{F, F, T, F}, true},
		{"again after a parallel op", []compute.OpType{N, D, N, N, N, N, A}, nil, []bool{T, F, F, T, F, F, F}, []bool{F, F, F, T, F, F, F}, true},
		{"first parallel op far", []compute.OpType{N, N, N, N, N, D, N, A}, nil, []bool{F, F, T, F, F, F, T, F}, []bool{F, F, F, F, F, F, T, F}, true},
		{"none", []compute.OpType{P, N, E, N}, nil, []bool{F, F, F, F}, []bool{F, F, F, F}, false},
		{"parallel op unused", []compute.OpType{P, N, D, N}, []int{2}, []bool{F, F, F, F}, []bool{F, F, F, F}, false},
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
		for _, atStart := range []bool{false, true} {
			fe.planPrewakeWith(atStart)
			want := tc.noStart
			if atStart {
				want = tc.withStart
			}
			if !slices.Equal(fe.prewake, want) {
				t.Errorf("%s (start wake %v): prewake %v, want %v", tc.name, atStart, fe.prewake, want)
			}
			if wantStart := atStart && tc.parallel; fe.wakeAtStart != wantStart {
				t.Errorf("%s (start wake %v): wakeAtStart %v, want %v", tc.name, atStart, fe.wakeAtStart, wantStart)
			}
		}
	}
}
