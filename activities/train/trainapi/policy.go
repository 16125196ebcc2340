package trainapi

import (
	"fmt"
	"math"

	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/internal/config"
)

// PolicyStepName is the RL trainer activity.
const PolicyStepName = "train.PolicyStep"

// PolicyStepInput trains policy version Version on one iteration's scored rollouts.
type PolicyStepInput struct {
	Store string `json:"store"`
	Run   string `json:"run"`
	// Phase names the checkpoint directory; a back-tracked branch uses its own ("grpo.b1").
	Phase     string `json:"phase"`
	Policy    string `json:"policy"`    // checkpoint of version Version
	Reference string `json:"reference"` // reference model (needed when kl_beta > 0)
	Version   int    `json:"version"`
	Rollouts  string `json:"rollouts"`
	// Rewards are per rollout, in file order.
	Rewards []float64 `json:"rewards"`
	// Shards replaces Rollouts and Rewards: the iteration's rollouts and verdicts objects, in
	// prompt order (policy/scored.go), so that nothing per sample travels in workflow history.
	Shards          []ScoredShard        `json:"shards,omitempty"`
	Loss            losscfg.PolicyConfig `json:"loss"`
	Optim           Optim                `json:"optim"`
	LR              float64              `json:"lr"`
	Epochs          int                  `json:"epochs"`           // passes over the rollouts
	Minibatch       int                  `json:"minibatch"`        // rows per optimizer step (0: all)
	DynamicSampling bool                 `json:"dynamic_sampling"` // drop groups whose rewards are all equal (DAPO)
	FreshOptimizer  bool                 `json:"fresh_optimizer"`
	// InjectNaN poisons the advantages (tests of the non-finite back-tracking branch).
	InjectNaN bool `json:"inject_nan,omitempty"`
	// PPO tunes GAE and the critic when Loss.Algorithm is ppo (nil: DefaultPPOConfig); see ppo.go.
	PPO *PPOConfig `json:"ppo,omitempty"`
	// Iteration is the RL iteration this step trains (0-based); the phase's metrics log records the
	// step as iteration Iteration+1, as the workflow counts it.
	Iteration int `json:"iteration,omitempty"`
	// Iterations (the phase's, > 0) and LRScale (back-tracking's factor; 0 means 1) place the step
	// on the phase's learning-rate schedule, which the trainer computes (train.PolicyLR) at
	// Iteration. LR is the rate a workflow computed itself before; the trainer uses it only when
	// Iterations is 0.
	Iterations int     `json:"iterations,omitempty"`
	LRScale    float64 `json:"lr_scale,omitempty"`
}

// ScoredShard is one shard of an iteration: a rollouts object and the verdicts object the reward
// role wrote beside it (one JSON line per rollout, file order, with its score).
type ScoredShard struct {
	Rollouts string `json:"rollouts"`
	Verdicts string `json:"verdicts"`
}

// PolicyStepOutput is version Version+1 and the step's metrics.
type PolicyStepOutput struct {
	Checkpoint string             `json:"checkpoint"`
	Version    int                `json:"version"`
	NonFinite  bool               `json:"non_finite"` // a loss or gradient was NaN/Inf: the update was skipped
	Metrics    map[string]float64 `json:"metrics"`
	Resumed    bool               `json:"resumed"`
}

// PPOConfig tunes PPO's advantages and its critic's start; the loss's knobs (clip range, value_coef,
// value_clip, entropy_coef, kl_beta) are in losscfg.PolicyConfig.
type PPOConfig struct {
	Gamma  float64 `json:"gamma" default:"1" help:"GAE discount γ; 1 for outcome rewards on finite responses"`
	Lambda float64 `json:"lambda" default:"0.95" help:"GAE λ: 0 = one-step TD (low variance, biased by the critic), 1 = Monte Carlo return minus V"`
	KLCoef float64 `json:"kl_coef" default:"0" help:"β of the per-token KL penalty −β·(log π_old − log π_ref) folded into the token rewards (InstructGPT-style); 0 = off. loss.kl_beta is a KL term in the loss instead"`
	Seed   uint64  `json:"seed,omitempty" help:"seeds the value head added to a starting checkpoint that has none; 0: the pipeline seed"`
	// StepRewards adds a process reward model's per-step scores to the token rewards (nil: off,
	// the sequence reward on the last token alone, as before).
	StepRewards *StepRewards `json:"step_rewards,omitempty" help:"process rewards: each step's score from a prm verifier of reward.verifiers, as a reward on the token that ends the step (beside the sequence reward on the last token); unset: off"`
}

// StepRewards puts a prm verifier's step scores on the tokens that end the steps (PPO with process
// supervision, Math-Shepherd style): step i of a completion (line i) ends at the token holding the
// newline after it (the last line without one: at its last byte's token; a last line cut by
// max_new_tokens gets none), and that token's reward gains Coef·(score_i − Baseline). Steps the
// verifier did not score (beyond its max_steps, or past the PRM's max_seq) get none.
type StepRewards struct {
	Verifier string  `json:"verifier" help:"label of a prm verifier in reward.verifiers (its as, else prm); its step scores travel in the verdicts objects"`
	Coef     float64 `json:"coef,omitempty" default:"1" help:"weight of each step's reward; 0 means 1"`
	Baseline float64 `json:"baseline,omitempty" default:"0" help:"subtracted from each step score before coef: 0.5 makes a step the PRM doubts a penalty, and more lines no longer mean more reward"`
}

// Validate names the bad field (paths under "ppo.step_rewards").
func (c StepRewards) Validate() error {
	switch {
	case c.Verifier == "":
		return &config.FieldError{Path: "ppo.step_rewards.verifier", Msg: "empty: want the label of a prm verifier in reward.verifiers"}
	case !(c.Coef >= 0) || math.IsInf(c.Coef, 0):
		return &config.FieldError{Path: "ppo.step_rewards.coef", Msg: fmt.Sprintf("%g: want a finite value >= 0 (0 means 1)", c.Coef)}
	case !(c.Baseline >= 0 && c.Baseline <= 1):
		return &config.FieldError{Path: "ppo.step_rewards.baseline", Msg: fmt.Sprintf("%g: want a value in [0, 1] (step scores are)", c.Baseline)}
	}
	return nil
}

// Reward is step score s's token reward: Coef·(s − Baseline), Coef 0 meaning 1.
func (c StepRewards) Reward(s float64) float64 {
	coef := c.Coef
	if coef == 0 {
		coef = 1
	}
	return coef * (s - c.Baseline)
}

// DefaultPPOConfig returns γ = 1, λ = 0.95, no KL in the reward.
func DefaultPPOConfig() PPOConfig { return PPOConfig{Gamma: 1, Lambda: 0.95} }

// Validate names the bad field (paths under "ppo").
func (c PPOConfig) Validate() error {
	switch {
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return &config.FieldError{Path: "ppo.gamma", Msg: fmt.Sprintf("%g: want a value in [0, 1]", c.Gamma)}
	case !(c.Lambda >= 0 && c.Lambda <= 1):
		return &config.FieldError{Path: "ppo.lambda", Msg: fmt.Sprintf("%g: want a value in [0, 1]", c.Lambda)}
	case !(c.KLCoef >= 0) || math.IsInf(c.KLCoef, 0):
		return &config.FieldError{Path: "ppo.kl_coef", Msg: fmt.Sprintf("%g: want a finite value >= 0 (0 = off)", c.KLCoef)}
	case c.StepRewards != nil:
		return c.StepRewards.Validate()
	}
	return nil
}
