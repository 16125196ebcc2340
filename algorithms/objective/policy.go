package objective

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model"
)

// PolicyMetrics are the metrics Policy reports (those loss.PolicyLoss does not compute report 0,
// except entropy, which is always measured: the completion tokens' mean entropy, aggregated as the loss).
var PolicyMetrics = []string{"pg_loss", "kl", "clip_frac_low", "clip_frac_high", "approx_kl", "ratio_mean",
	"tis_truncated_frac", "entropy", "tokens"}

// Policy is the policy-gradient objective of RL (GRPO family, RLOO, REINFORCE++; no critic).
//
// Inputs, in order ([rows, seq] unless stated; sequences are prompt+completion aligned for next-token
// prediction: targets[r][t] follows tokens[r][t]):
//
//	0 tokens    int32     model input
//	1 targets   int32     the sampled tokens whose log-probs are trained
//	2 positions int32
//	3 valid     bool      keys attention may see
//	4 mask      float32   1 on completion targets, 0 on prompt and padding
//	5 old       float32   log π_old(target): the trainer's log-probs before this iteration's updates
//	6 behaviour float32   log π_behaviour(target) recorded by the rollout engine (TIS)
//	7 ref       float32   log π_ref(target) (ignored when kl_beta = 0)
//	8 adv       float32   [rows] sequence-level advantages
func Policy(cfg loss.PolicyConfig) Objective { return policy(cfg, false) }

// PolicyOnPolicy is Policy for a step whose old policy is the one being trained: one epoch of one
// minibatch, so π_old = π_θ before the update and the trainer need not recompute it in a separate
// forward pass. The old input (5) is ignored; log π_old is StopGradient(log π_θ) in the graph (ratio 1,
// no clipping), which is what the recomputation gave up to rounding, at a third less work per step.
func PolicyOnPolicy(cfg loss.PolicyConfig) Objective { return policy(cfg, true) }

func policy(cfg loss.PolicyConfig, onPolicy bool) Objective {
	name := "policy"
	if onPolicy {
		name = "policy-onpolicy"
	}
	return Objective{
		Name: fmt.Sprintf("%s[%s clip=%g/%g dual=%g kl=%g/%s agg=%s max=%d tis=%g ent=%g]", name, cfg.Algorithm,
			cfg.ClipLow, cfg.ClipHigh, cfg.DualClip, cfg.KLBeta, cfg.KLEstimator, cfg.Aggregation, cfg.MaxLen, cfg.TISThreshold, cfg.EntropyCoef),
		Metrics: PolicyMetrics,
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			if len(in) != 9 {
				panic(fmt.Sprintf("objective policy: %d inputs, want 9", len(in)))
			}
			logits := model.Forward(scope, mc, in[0], in[2], in[3])
			logp := model.TokenLogProbs(logits, in[1])
			pin := loss.PolicyInputs{Logp: logp, OldLogp: in[5], Advantages: in[8], Mask: in[4]}
			if onPolicy {
				pin.OldLogp = nil // loss.PolicyLoss: StopGradient(logp)
			}
			if cfg.TISThreshold > 0 {
				pin.BehaviourLogp = in[6]
			}
			if cfg.KLBeta > 0 {
				pin.RefLogp = in[7]
			}
			entropy := model.Entropy(logits)
			if cfg.EntropyCoef != 0 {
				pin.Entropy = entropy
			}
			l, m := loss.PolicyLoss(cfg, pin)
			out := map[string]*Node(m)
			out["tokens"] = ReduceAllSum(in[4])
			if _, ok := out["entropy"]; !ok {
				// Measured without a bonus too: a collapsing or spreading policy is what an RL run's
				// entropy curve is watched for, and 0 would read as a collapsed one.
				out["entropy"] = StopGradient(loss.Aggregate(entropy, in[4], cfg.Aggregation, cfg.MaxLen))
			}
			return l, out
		},
	}
}
