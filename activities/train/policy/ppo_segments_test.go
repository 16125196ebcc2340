package policy

import (
	"fmt"
	"math"
	"testing"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// TestPPOAdvantagesOverSegments: an agent's episode of two segments is two rows whose counted
// tokens GAE runs over as one trajectory: with γ = λ = 1 every token of both segments has the
// episode's reward as its return; with λ = 0 the first segment's last token bootstraps from the
// critic's value of the second segment's first token, and only the last segment's last token
// carries the reward. A plain rollout beside it is one row, as before; masked tokens (a tool's, a
// prompt's) get nothing. The same holds when a minibatch ends between an episode's rows.
func TestPPOAdvantagesOverSegments(t *testing.T) {
	ep := rollout.Rollout{ID: "ep", Group: 0, PromptTokens: []int{1, 2}, Tokens: []int{3, 4}, Policy: []bool{true, true}, LogProbs: []float32{-.1, -.2},
		Segments: []rollout.Segment{{PromptTokens: []int{1, 9}, Tokens: []int{5, 6, 7}, Policy: []bool{true, false, true}, LogProbs: []float32{-.3, 0, -.4}}}}
	plain := rollout.Rollout{ID: "plain", Group: 0, PromptTokens: []int{1, 2}, Tokens: []int{8}, LogProbs: []float32{-.5}}
	rewards := []float64{1, 0.5}
	rs, adv, idx := segmentRows([]rollout.Rollout{ep, plain}, make([]float64, 2), []int{0, 1})
	episode := rowEpisodes(idx, 2)
	if want := []int{0, 2, 1}; len(idx) != 3 || idx[1] != want[1] {
		t.Fatalf("rows %v, want %v", idx, want)
	}
	// value(row, t): the critic's V at position t of rollout row `row` (distinct everywhere).
	value := func(row, t int) float32 { return 0.1*float32(row+1) + 0.01*float32(t) }
	// Row positions (a position t predicts token t+1): ep's tokens 3 4 at t = 1 2; its segment's
	// 5 (6, a tool's) 7 at t = 1 (2) 3; plain's 8 at t = 1.
	for _, c := range []struct {
		name   string
		chunks [][]int
	}{
		{"one minibatch", [][]int{{0, 2, 1}}},
		{"a minibatch ends between the episode's rows", [][]int{{0}, {2, 1}}},
	} {
		for _, g := range []struct {
			lambda float64
			want   map[[2]int]float64 // {row, position} → return
		}{
			{1, map[[2]int]float64{{0, 1}: 1, {0, 2}: 1, {2, 1}: 1, {2, 3}: 1, {1, 1}: 0.5}},
			{0, map[[2]int]float64{{0, 1}: float64(value(0, 2)), {0, 2}: float64(value(2, 1)),
				{2, 1}: float64(value(2, 3)), {2, 3}: 1, {1, 1}: 0.5}},
		} {
			t.Run(fmt.Sprintf("%s/lambda=%g", c.name, g.lambda), func(t *testing.T) {
				rows := make([]policyRows, len(c.chunks))
				old, vals := make([][][]float32, len(c.chunks)), make([][][]float32, len(c.chunks))
				for k, ch := range c.chunks {
					rows[k] = buildPolicyRows(rs, adv, ch)
					for _, r := range ch {
						o, v := make([]float32, rows[k].seq), make([]float32, rows[k].seq)
						for t := range v {
							v[t] = value(r, t)
						}
						old[k], vals[k] = append(old[k], o), append(vals[k], v)
					}
				}
				pc := trainapi.PPOConfig{Gamma: 1, Lambda: g.lambda}
				a, ret, _, err := ppoAdvantages(rows, old, old, vals, c.chunks, episode, rewards, nil, pc)
				if err != nil {
					t.Fatal(err)
				}
				for k, ch := range c.chunks {
					for j, r := range ch {
						for pos := range rows[k].seq {
							want, counted := g.want[[2]int{r, pos}]
							if !counted {
								if a[k][j][pos] != 0 || ret[k][j][pos] != 0 {
									t.Errorf("λ=%g row %d position %d (not trained): advantage %g return %g, want 0", g.lambda, r, pos, a[k][j][pos], ret[k][j][pos])
								}
								continue
							}
							if got := float64(ret[k][j][pos]); math.Abs(got-want) > 1e-6 {
								t.Errorf("λ=%g row %d position %d: return %g, want %g", g.lambda, r, pos, got, want)
							}
						}
					}
				}
			})
		}
	}
}
