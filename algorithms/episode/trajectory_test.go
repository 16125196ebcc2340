package episode

import (
	"reflect"
	"strings"
	"testing"
)

// call is a test call: prompt and completion ids, each completion token with log-probability
// -(its position+1)/10 so that a misplaced log-probability shows.
func call(prompt, tokens []int) Call {
	lp := make([]float32, len(tokens))
	for i := range lp {
		lp[i] = -float32(i+1) / 10
	}
	return Call{Prompt: prompt, Tokens: tokens, LogProbs: lp, Version: 3}
}

func TestAssemble(t *testing.T) {
	const T, F = true, false
	cases := []struct {
		name  string
		calls []Call
		want  []Segment
	}{
		{"one call", []Call{call([]int{1, 2}, []int{7, 8, 9})},
			[]Segment{{Prompt: []int{1, 2}, Tokens: []int{7, 8, 9}, Policy: []bool{T, T, T}, LogProbs: []float32{-.1, -.2, -.3}, Calls: 1}}},
		{"a tool result between two calls is merged, unmasked", []Call{
			call([]int{1, 2}, []int{7, 8}),
			call([]int{1, 2, 7, 8, 40, 41}, []int{9}),
		}, []Segment{{Prompt: []int{1, 2}, Tokens: []int{7, 8, 40, 41, 9}, Policy: []bool{T, T, F, F, T},
			LogProbs: []float32{-.1, -.2, 0, 0, -.1}, Calls: 2}}},
		{"a call right after the last completion adds nothing between", []Call{
			call([]int{1}, []int{7}),
			call([]int{1, 7}, []int{8}),
		}, []Segment{{Prompt: []int{1}, Tokens: []int{7, 8}, Policy: []bool{T, T}, LogProbs: []float32{-.1, -.1}, Calls: 2}}},
		{"a rewritten history starts a new segment", []Call{
			call([]int{1, 2}, []int{7, 8}),
			call([]int{1, 2, 7, 5, 40}, []int{9}), // the agent changed the model's 8 into 5
		}, []Segment{
			{Prompt: []int{1, 2}, Tokens: []int{7, 8}, Policy: []bool{T, T}, LogProbs: []float32{-.1, -.2}, Calls: 1},
			{Prompt: []int{1, 2, 7, 5, 40}, Tokens: []int{9}, Policy: []bool{T}, LogProbs: []float32{-.1}, Calls: 1},
		}},
		{"a changed prompt starts a new segment", []Call{
			call([]int{1, 2}, []int{7}),
			call([]int{3, 2, 7, 40}, []int{9}), // the same completion after another first token
		}, []Segment{
			{Prompt: []int{1, 2}, Tokens: []int{7}, Policy: []bool{T}, LogProbs: []float32{-.1}, Calls: 1},
			{Prompt: []int{3, 2, 7, 40}, Tokens: []int{9}, Policy: []bool{T}, LogProbs: []float32{-.1}, Calls: 1},
		}},
		{"a prompt shorter than the context starts a new segment", []Call{
			call([]int{1, 2}, []int{7, 8}),
			call([]int{1, 2, 7}, []int{9}),
		}, []Segment{
			{Prompt: []int{1, 2}, Tokens: []int{7, 8}, Policy: []bool{T, T}, LogProbs: []float32{-.1, -.2}, Calls: 1},
			{Prompt: []int{1, 2, 7}, Tokens: []int{9}, Policy: []bool{T}, LogProbs: []float32{-.1}, Calls: 1},
		}},
		{"a call continues the latest segment only", []Call{
			call([]int{1}, []int{7}),
			call([]int{2}, []int{8}),
			call([]int{1, 7, 50}, []int{9}), // extends the first segment, which is closed
			call([]int{1, 7, 50, 9, 51}, []int{6}),
		}, []Segment{
			{Prompt: []int{1}, Tokens: []int{7}, Policy: []bool{T}, LogProbs: []float32{-.1}, Calls: 1},
			{Prompt: []int{2}, Tokens: []int{8}, Policy: []bool{T}, LogProbs: []float32{-.1}, Calls: 1},
			{Prompt: []int{1, 7, 50}, Tokens: []int{9, 51, 6}, Policy: []bool{T, F, T}, LogProbs: []float32{-.1, 0, -.1}, Calls: 2},
		}},
		{"an empty completion", []Call{call([]int{1}, []int{}), call([]int{1, 5}, []int{6})},
			[]Segment{{Prompt: []int{1}, Tokens: []int{5, 6}, Policy: []bool{F, T}, LogProbs: []float32{0, -.1}, Calls: 2}}},
		{"no calls", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Assemble(c.calls)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestAssembleKeepsCallsIntact: the segments do not alias the calls (a caller may reuse them).
func TestAssembleKeepsCallsIntact(t *testing.T) {
	calls := []Call{call([]int{1, 2}, []int{7}), call([]int{1, 2, 7, 4}, []int{8})}
	segs, err := Assemble(calls)
	if err != nil {
		t.Fatal(err)
	}
	segs[0].Prompt[0], segs[0].Tokens[0] = 99, 99
	if calls[0].Prompt[0] != 1 || calls[0].Tokens[0] != 7 {
		t.Fatalf("assemble aliased its input: %+v", calls[0])
	}
}

func TestAssembleRefuses(t *testing.T) {
	cases := []struct {
		name  string
		calls []Call
		want  string
	}{
		{"empty prompt", []Call{{Tokens: []int{1}, LogProbs: []float32{0}}}, "call 0 has an empty prompt"},
		{"log-probs", []Call{call([]int{1}, []int{2}), {Prompt: []int{1}, Tokens: []int{1, 2}, LogProbs: []float32{0}, Version: 3}},
			"call 1: 1 log-probs for 2 tokens"},
		{"versions", []Call{call([]int{1}, []int{2}), {Prompt: []int{1, 2}, Tokens: []int{3}, LogProbs: []float32{0}, Version: 4}},
			"call 1 was served by policy version 4, call 0 by 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Assemble(c.calls)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}
