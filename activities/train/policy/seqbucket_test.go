package policy

import (
	"fmt"
	"testing"

	"github.com/temperml/temper/algorithms/rollout"
)

// TestSeqBucket: the padded lengths of a policy step's rows, two buckets an octave.
func TestSeqBucket(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 8}, {1, 8}, {8, 8}, {9, 10}, {10, 10}, {11, 12}, {12, 12}, {13, 14}, {15, 16}, {16, 16},
		{17, 20}, {21, 24}, {25, 28}, {29, 32}, {33, 40}, {48, 48}, {49, 56}, {57, 64}, {100, 112},
		{129, 160}, {200, 224}, {225, 256},
	} {
		if got := SeqBucket(c.n); got != c.want {
			t.Errorf("SeqBucket(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestPolicyRowsCompletionWindow: each row's completion columns (trained or not) and the window,
// a multiple of 4, used only when it is shorter than the rows.
func TestPolicyRowsCompletionWindow(t *testing.T) {
	rs := []rollout.Rollout{
		{PromptTokens: []int{1, 2, 3}, Tokens: []int{4, 5}, LogProbs: []float32{-1, -2}},
		{PromptTokens: []int{1, 2, 3, 4, 5}, Tokens: []int{6, 7, 8, 9, 10}, LogProbs: []float32{-1, -2, -3, -4, -5},
			Policy: []bool{true, false, true, true, true}},
	}
	p := buildPolicyRows(rs, []float64{1, -1}, []int{0, 1})
	if p.seq != 10 || p.window != 8 || p.completionWindow() != 8 {
		t.Fatalf("seq %d, window %d (%d): want 10, 8", p.seq, p.window, p.completionWindow())
	}
	if got := fmt.Sprint(p.cols); got != "[[2 3] [4 5 6 7 8]]" {
		t.Fatalf("cols %s", got)
	}
	if p.mask[1][5] != 0 || p.mask[1][4] != 1 || p.mask[0][2] != 1 || p.mask[0][4] != 0 {
		t.Fatalf("mask %v", p.mask)
	}
	zeros := [][]float32{make([]float32, 10), make([]float32, 10)}
	ts := p.policyBatch(zeros, zeros, p.completionWindow()).Tensors()
	if ct := ts[len(ts)-1]; fmt.Sprint(ct.Shape().Dimensions) != "[2 8]" || fmt.Sprint(ct.Value()) != "[[2 3 -1 -1 -1 -1 -1 -1] [4 5 6 7 8 -1 -1 -1]]" {
		t.Fatalf("cols tensor %s %v", ct.Shape(), ct.Value())
	}
	short := buildPolicyRows(rs[:1], []float64{1}, []int{0})
	if short.seq != 8 || short.window != 4 || short.completionWindow() != 4 {
		t.Fatalf("one short row: seq %d, window %d", short.seq, short.window)
	}
	long := rollout.Rollout{PromptTokens: []int{1}, Tokens: []int{2, 3, 4, 5, 6, 7, 8}, LogProbs: make([]float32, 7)}
	if w := buildPolicyRows([]rollout.Rollout{long}, []float64{1}, []int{0}); w.completionWindow() != 0 {
		t.Fatalf("a completion filling its row: window %d, want 0 (the whole row)", w.completionWindow())
	}
}
