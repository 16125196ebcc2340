package policy

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/advantage"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tokenize"
)

// stepRollout is a byte-tokenizer rollout: prompt "<bos>q" (2 tokens), completion c, its stop token
// kept when stop.
func stepRollout(id, c string, stop bool) rollout.Rollout {
	toks := tokenize.Byte{}.Encode(c)
	reason := "length"
	if stop {
		toks, reason = append(toks, tokenize.ByteEOS), "stop"
	}
	lp := make([]float32, len(toks))
	return rollout.Rollout{ID: id, PromptTokens: []int{tokenize.ByteBOS, 'q'}, Tokens: toks, LogProbs: lp, Completion: c, StopReason: reason}
}

// TestStepRewardPlacement is the reference of ppo.step_rewards on hand-computed cases: the token
// rewards of rows built as the policy step builds them (buildPolicyRows), with the sequence reward on
// the last counted token and Coef·(score − Baseline) on the position whose target is the token that
// ends each step. Row positions: with a 2-token prompt, position t predicts completion token t−1.
//
//	"1\n22\n3"+EOS, scores .9 .2 .6, coef 2, baseline .5 → steps end on tokens 1 ("\n"), 4 ("\n"),
//	  5 ("3"): positions 2, 5, 6 get 0.8, −0.6, 0.2; EOS (token 6, position 7) gets the reward 1.
//	"7\n8" cut by the budget, scores .5 .9 → step 0 ends on token 1, position 2: 0; step 1 is cut.
//	"ab\ncd\nef"+EOS, the verifier scored 2 steps of 3 (its max_steps) → positions 3 and 6.
//	"x"+EOS, no step scores (too long for the PRM) → the sequence reward alone, on position 2.
func TestStepRewardPlacement(t *testing.T) {
	rs := []rollout.Rollout{
		stepRollout("a", "1\n22\n3", true),
		stepRollout("b", "7\n8", false),
		stepRollout("c", "ab\ncd\nef", true),
		stepRollout("d", "x", true),
	}
	scores := [][]float64{{0.9, 0.2, 0.6}, {0.5, 0.9}, {0.25, 1}, nil}
	rewards := []float64{1, 0, 0.5, 0.25}
	cfg := trainapi.StepRewards{Verifier: "prm", Coef: 2, Baseline: 0.5}
	m := map[string]float64{}
	steps, err := stepRewards(rs, scores, tokenize.Byte{}.Decode, cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{
		{0, 0, 0.8, 0, 0, -0.6, 0.2, 1},
		{0, 0, 0, 0},
		{0, 0, 0, -0.5, 0, 0, 1, 0, 0, 0.5},
		{0, 0, 0.25},
	}
	idx := []int{0, 1, 2, 3}
	rows := buildPolicyRows(rs, make([]float64, len(rs)), idx)
	mask := make([][]bool, len(rs))
	for r := range mask {
		mask[r] = make([]bool, rows.seq)
		for t := range rows.seq {
			mask[r][t] = rows.mask[r][t] > 0
		}
	}
	tr, err := advantage.TokenRewards(rewards, mask, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := advantage.AddStepRewards(tr, mask, steps); err != nil {
		t.Fatal(err)
	}
	for r := range want {
		for c, v := range tr[r] {
			w := 0.0
			if c < len(want[r]) {
				w = want[r][c]
			}
			if math.Abs(v-w) > 1e-12 {
				t.Errorf("rollout %s: token rewards %v, want %v", rs[r].ID, tr[r], want[r])
				break
			}
		}
	}
	// 6 steps placed over 4 samples, one cut: rewards .8 −.6 .2 0 −.5 1 and scores .9 .2 .6 .5 .25 1.
	for k, v := range map[string]float64{"step_rewards_per_sample": 6.0 / 4, "step_rewards_cut": 1.0 / 4,
		"step_reward_mean": 0.9 / 6, "step_score_mean": 3.45 / 6} {
		if math.Abs(m[k]-v) > 1e-12 {
			t.Errorf("metric %s = %v, want %v (all %v)", k, m[k], v, m)
		}
	}
	if _, err := stepRewards(rs[:1], [][]float64{{1, 1, 1, 1}}, tokenize.Byte{}.Decode, cfg, map[string]float64{}); err == nil || !strings.Contains(err.Error(), "4 step scores for 3 steps") {
		t.Errorf("more scores than steps: %v", err)
	}
	tool := stepRollout("e", "1\n2", true)
	tool.Policy = []bool{true, false, true, true}
	if _, err := stepRewards([]rollout.Rollout{tool}, [][]float64{{1}}, tokenize.Byte{}.Decode, cfg, map[string]float64{}); err == nil || !strings.Contains(err.Error(), "did not write") {
		t.Errorf("a step ending on a tool's token: %v", err)
	}
	if got := fmt.Sprint(trainapi.StepRewards{Verifier: "p"}.Reward(0.25)); got != "0.25" {
		t.Errorf("coef 0 means 1: %s", got)
	}
}
