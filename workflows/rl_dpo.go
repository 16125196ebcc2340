package workflows

import (
	"fmt"
	"reflect"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/internal/config"
)

// KindOnlineDPO is online DPO: the RL loop (rlRun: rollouts of the current policy on the rollout
// queue, scored by the phase's verifiers or a reward model on the reward queue, held-out evaluation,
// back-tracking) whose policy step is a pairwise preference loss against the reference model
// (train.OnlineDPOStep): each prompt's best sample is chosen and its worst rejected, ties skipped.
const KindOnlineDPO = "online_dpo"

// DPOSums are online DPO's sums over the iterations, for the phase's result.
type DPOSums struct {
	Pairs  int `json:"pairs"`
	Ties   int `json:"ties"`
	Groups int `json:"groups"`
	// Over the iterations that formed a pair: the implicit reward's margin and accuracy (the
	// objective's rewards/margin, rewards/accuracy) and the verifier score gap of the pairs.
	Trained  int     `json:"trained"`
	Margin   float64 `json:"margin"`
	Accuracy float64 `json:"accuracy"`
	Gap      float64 `json:"gap"`
}

func init() {
	RegisterPhase(PhaseKind{Kind: KindOnlineDPO, WorkflowName: "RL-" + KindOnlineDPO, Workflow: RL,
		Doc: "online DPO: each iteration samples group completions per prompt from the current policy, ranks them with the verifiers or a reward model, and trains the dpo or ipo loss (preference) on best-vs-worst pairs (ties skipped) against the starting model; rollout, reward and trainer queues",
		NewConfig: func() PhaseConfig {
			c := defaultRLConfig(losscfg.AlgoGRPO)
			c.kind, c.Group = KindOnlineDPO, 2
			p := losscfg.DefaultPreference(losscfg.PrefDPO)
			c.Preference = &p
			return c
		}})
}

// validateDPO checks online DPO's settings: its loss under preference (dpo or ipo), none under
// loss, and no setting only the policy-gradient step reads.
func (c *RLConfig) validateDPO() error {
	dpo := c.kind == KindOnlineDPO
	switch {
	case c.Preference != nil && !dpo:
		return &config.FieldError{Path: "preference", Msg: "only the online_dpo phase kind trains a pairwise loss"}
	case !dpo:
		return nil
	case c.Preference == nil:
		return &config.FieldError{Path: "preference", Msg: "the online_dpo phase needs its loss (null is not allowed)"}
	case c.Preference.Kind != losscfg.PrefDPO && c.Preference.Kind != losscfg.PrefIPO:
		return &config.FieldError{Path: "preference.kind", Msg: fmt.Sprintf("%q: allowed values: dpo, ipo (online pairs need a reference-based pairwise loss)", c.Preference.Kind)}
	case !reflect.DeepEqual(c.Loss, losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)):
		return &config.FieldError{Path: "loss", Msg: "online_dpo trains the pairwise loss under preference (kind, beta, ...): leave loss unset"}
	case c.DynamicSampling:
		return &config.FieldError{Path: "dynamic_sampling", Msg: "online_dpo skips groups whose samples all score the same itself: leave it off"}
	case len(c.Rollout.Tools) > 0 || c.Rollout.Agent != nil:
		return &config.FieldError{Path: "rollout", Msg: "online_dpo pairs plain completions: leave rollout.tools and rollout.agent unset"}
	}
	if err := c.Preference.Validate(); err != nil {
		return &config.FieldError{Path: "preference", Msg: err.Error()}
	}
	return nil
}

// dpoStepInput is online DPO's step of iteration st.Iter: its pairs' loss with β scaled by the
// back-tracks so far (β plays the KL coefficient's part), its learning rate by the schedule.
func (r *rlRun) dpoStepInput(b rlRollouts) trainapi.OnlineDPOStepInput {
	st, in, cfg := &r.st, r.in, r.cfg
	lc := *cfg.Preference
	lc.Beta = lc.BetaOrDefault() * st.KLScale
	return trainapi.OnlineDPOStepInput{Store: in.Store, Run: in.RunID, Phase: st.Dir, Policy: st.Policy, Reference: st.Reference,
		Version: st.Version, Shards: b.shards, Loss: lc, Optim: cfg.Optimizer, Epochs: cfg.Epochs, Minibatch: cfg.Minibatch,
		FreshOptimizer: st.FreshOptimizer, Iteration: st.Iter, Iterations: cfg.Iterations, LRScale: st.LRScale,
		InjectNaN: cfg.InjectNaNAt == st.Iter+1 && len(st.Branches) == 0}
}

// addPairs sums an online DPO step's pair metrics into the state.
func (st *RLState) addPairs(m map[string]float64) {
	if st.DPO == nil {
		st.DPO = &DPOSums{}
	}
	d := st.DPO
	d.Pairs += int(m["pairs_formed"])
	d.Ties += int(m["ties_skipped"])
	d.Groups += int(m["pair_groups"])
	if m["pairs_formed"] > 0 {
		d.Trained++
		d.Margin += m["rewards/margin"]
		d.Accuracy += m["rewards/accuracy"]
		d.Gap += m["pair_score_gap"]
	}
}

// dpoMetrics adds online DPO's sums to the phase's result: totals, per iteration, and means over
// the iterations that trained.
func (st *RLState) dpoMetrics(metrics map[string]float64) {
	d := st.DPO
	if d == nil {
		d = &DPOSums{}
	}
	n, t := float64(max(1, st.Iter)), float64(max(1, d.Trained))
	metrics["pairs_formed"], metrics["ties_skipped"] = float64(d.Pairs), float64(d.Ties)
	metrics["pairs_per_iteration"] = float64(d.Pairs) / n
	if d.Groups > 0 {
		metrics["tie_rate"] = float64(d.Ties) / float64(d.Groups)
	}
	metrics["implicit_reward_margin"], metrics["implicit_reward_accuracy"] = d.Margin/t, d.Accuracy/t
	metrics["pair_score_gap"] = d.Gap / t
}
