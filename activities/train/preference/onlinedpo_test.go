package preference

import (
	"reflect"
	"testing"

	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tokenize"
)

// TestPairBatches: each pair's sides are the prompt the policy saw and the tokens it sampled, only
// the sampled ones counted (mask[t] = 1 where token t+1 is sampled), both sides of a minibatch padded
// to one length; minibatches hold at most minibatch pairs, in pair order.
func TestPairBatches(t *testing.T) {
	rs := []rollout.Rollout{
		{ID: "a", PromptTokens: []int{1, 2, 3}, Tokens: []int{4, 5}},
		{ID: "b", PromptTokens: []int{1, 2, 3}, Tokens: []int{6, 7, 8, 9}},
		{ID: "c", PromptTokens: []int{1, 2}, Tokens: []int{10}},
		{ID: "d", PromptTokens: []int{1, 2}, Tokens: []int{11, 12}},
	}
	pairs := []rollout.Pair{{Chosen: 0, Rejected: 1}, {Chosen: 3, Rejected: 2}}
	all := pairBatches(rs, pairs, 0)
	if len(all) != 1 {
		t.Fatalf("%d minibatches, want 1", len(all))
	}
	b := all[0]
	p := tokenize.BytePAD
	// Row 0: chosen a (5 tokens), rejected b (7): both laid out to 7.
	wantTok := [][]int{{1, 2, 3, 4, 5, p, p}, {1, 2, 11, 12, p, p, p}}
	wantMask := [][]float32{{0, 0, 1, 1, 0, 0, 0}, {0, 1, 1, 0, 0, 0, 0}}
	if !reflect.DeepEqual(b.chosen.tokens, wantTok) || !reflect.DeepEqual(b.chosen.mask, wantMask) {
		t.Errorf("chosen tokens %v mask %v; want %v, %v", b.chosen.tokens, b.chosen.mask, wantTok, wantMask)
	}
	wantRej := [][]float32{{0, 0, 1, 1, 1, 1, 0}, {0, 1, 0, 0, 0, 0, 0}}
	if !reflect.DeepEqual(b.rejected.mask, wantRej) || len(b.rejected.tokens[0]) != 7 {
		t.Errorf("rejected mask %v; want %v, rows of 7", b.rejected.mask, wantRej)
	}
	split := pairBatches(rs, pairs, 1)
	if len(split) != 2 || len(split[0].chosen.tokens) != 1 || split[1].chosen.tokens[0][2] != 11 || len(split[1].chosen.tokens[0]) != 4 {
		t.Errorf("minibatch 1: %+v; want two minibatches of one pair, the second d against c laid out to 4", split)
	}
	if pairBatches(rs, nil, 0) != nil {
		t.Error("no pairs: want no minibatch")
	}
}
