package advantage

import (
	"math"
	"strings"
	"testing"
)

// TestAddStepRewards: process rewards add to TokenRewards' output on their tokens (the sequence
// reward and the KL penalty stay), hand-computed; a step on the last token adds to the sequence
// reward; positions outside the row or not counted, and non-finite rewards, are errors.
func TestAddStepRewards(t *testing.T) {
	mask := [][]bool{{false, true, true, true, true}, {true, true, false, true, false}}
	kl := [][]float64{{9, 0.1, 0.2, 0.3, 0.4}, {0.5, 0.6, 9, 0.7, 9}}
	tr, err := TokenRewards([]float64{1, 0}, mask, kl, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	steps := [][]StepReward{{{Token: 2, Reward: 0.8}, {Token: 4, Reward: -0.25}}, {{Token: 1, Reward: 0.3}}}
	if err := AddStepRewards(tr, mask, steps); err != nil {
		t.Fatal(err)
	}
	want := [][]float64{
		{0, -0.05, -0.1 + 0.8, -0.15, -0.2 + 1 - 0.25},
		{-0.25, -0.3 + 0.3, 0, -0.35 + 0, 0},
	}
	checkGroups(t, "token rewards with steps", tr, want)
	none := [][]float64{{0, 0, 0, 0, 1}, {0, 0, 0, 0, 0}}
	if err := AddStepRewards(none, mask, [][]StepReward{nil, nil}); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, "no steps", none, [][]float64{{0, 0, 0, 0, 1}, {0, 0, 0, 0, 0}})
	for _, c := range []struct {
		name  string
		steps [][]StepReward
		msg   string
	}{
		{"uncounted", [][]StepReward{{{Token: 0, Reward: 1}}, nil}, "row 0 step 0: token 0 is not a counted token"},
		{"past the row", [][]StepReward{nil, {{Token: 5, Reward: 1}}}, "row 1 step 0: token 5"},
		{"negative", [][]StepReward{nil, {{Token: -1, Reward: 1}}}, "token -1"},
		{"nan", [][]StepReward{{{Token: 1, Reward: math.NaN()}}, nil}, "not finite"},
		{"rows", [][]StepReward{nil}, "1 rows of steps for 2 mask rows"},
	} {
		tr := [][]float64{make([]float64, 5), make([]float64, 5)}
		if err := AddStepRewards(tr, mask, c.steps); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %q", c.name, err, c.msg)
		}
	}
}
