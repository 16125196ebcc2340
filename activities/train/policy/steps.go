package policy

import (
	"fmt"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/advantage"
	"github.com/temperml/temper/algorithms/rollout"
)

// stepRewards places PPO's process rewards (ppo.step_rewards): for sample i, each step its verifier
// scored (scores[i][k], from the verdicts objects) becomes a reward cfg.Reward(score) on the row
// position whose target is the token that ends step k (rollout.StepEnds; a row's position t
// predicts completion token t+1−len(prompt), buildPolicyRows). A step the verifier scored beyond
// the completion's steps cannot happen (both split the same text) and is an error; a last step cut
// by the token budget gets no reward (the model never finished it) and is counted as cut. It adds
// to m step_rewards_per_sample, step_rewards_cut (cut steps per sample) and, when any step was
// placed, step_reward_mean (of the rewards placed) and step_score_mean (of their scores).
//
//	rs: [n]; scores: [n][steps scored] → [n][steps placed] in row positions
func stepRewards(rs []rollout.Rollout, scores [][]float64, decode func([]int) string, cfg trainapi.StepRewards, m map[string]float64) ([][]advantage.StepReward, error) {
	if len(scores) != len(rs) {
		return nil, fmt.Errorf("step rewards: %d samples scored for %d rollouts", len(scores), len(rs))
	}
	out := make([][]advantage.StepReward, len(rs))
	var placed, cut int
	var rewardSum, scoreSum float64
	for i, r := range rs {
		if len(scores[i]) == 0 {
			continue
		}
		ends, lastCut, err := rollout.StepEnds(r, decode)
		if err != nil {
			return nil, fmt.Errorf("step rewards: %w", err)
		}
		if len(scores[i]) > len(ends) {
			return nil, fmt.Errorf("step rewards: rollout %s: %d step scores for %d steps", r.ID, len(scores[i]), len(ends))
		}
		for k, s := range scores[i] {
			if lastCut && k == len(ends)-1 {
				cut++
				continue
			}
			if !r.Trained(ends[k]) {
				return nil, fmt.Errorf("step rewards: rollout %s: step %d ends on token %d, which the policy did not write", r.ID, k, ends[k])
			}
			rw := cfg.Reward(s)
			out[i] = append(out[i], advantage.StepReward{Token: len(r.PromptTokens) + ends[k] - 1, Reward: rw})
			placed++
			rewardSum += rw
			scoreSum += s
		}
	}
	n := float64(max(1, len(rs)))
	m["step_rewards_per_sample"], m["step_rewards_cut"] = float64(placed)/n, float64(cut)/n
	if placed > 0 {
		m["step_reward_mean"], m["step_score_mean"] = rewardSum/float64(placed), scoreSum/float64(placed)
	}
	return out, nil
}
