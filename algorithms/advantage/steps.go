package advantage

import (
	"fmt"
	"math"
)

// StepReward is a reward on one token of a row: a process reward model's score of the step that
// ends there.
type StepReward struct {
	Token  int     // the row's position (a counted token)
	Reward float64 // added to that token's reward
}

// AddStepRewards adds process rewards to token rewards in place: row i's token steps[i][k].Token
// gets steps[i][k].Reward on top of what TokenRewards put there (the KL penalty and, on the last
// counted token, the sequence reward). This is PPO with process supervision as Math-Shepherd
// (Wang et al. 2024) trains it and Lightman et al. (2023) motivate: a reward at the end of every
// step, so that GAE credits each step with the rewards from it on, rather than every token with
// the outcome alone.
//
//	tokenRewards: [batch][seq_i] (in place); mask: [batch][seq_i]; steps: [batch][steps_i] (nil rows: none)
//
// A reward on a position outside the row or not counted is an error: there is nothing to credit.
func AddStepRewards(tokenRewards [][]float64, mask [][]bool, steps [][]StepReward) error {
	if err := sameShape("rewards", tokenRewards, mask); err != nil {
		return err
	}
	if len(steps) != len(mask) {
		return fmt.Errorf("advantage: step rewards: %d rows of steps for %d mask rows", len(steps), len(mask))
	}
	for i, row := range steps {
		for k, s := range row {
			switch {
			case math.IsNaN(s.Reward) || math.IsInf(s.Reward, 0):
				return fmt.Errorf("advantage: step rewards: row %d step %d: reward %g is not finite", i, k, s.Reward)
			case s.Token < 0 || s.Token >= len(mask[i]) || !mask[i][s.Token]:
				return fmt.Errorf("advantage: step rewards: row %d step %d: token %d is not a counted token of the row (%d positions)", i, k, s.Token, len(mask[i]))
			}
			tokenRewards[i][s.Token] += s.Reward
		}
	}
	return nil
}
