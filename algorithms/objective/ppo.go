package objective

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model"
)

// PPOMetrics are the metrics PPO reports, in reporting order. Token-means over the mask unless said:
// pg_loss (aggregated clipped surrogate), value_loss (aggregated clipped critic loss, reported even
// when value_coef is 0), value_clip_frac, entropy (aggregated), clip_frac (clip_frac_low +
// clip_frac_high + clip_frac_dual: tokens whose ratio clipping stopped), kl (KL_t to the reference,
// when kl_beta > 0), approx_kl (KL(π_old‖π_θ), k3), ratio_mean, tis_truncated_frac (when TIS is on),
// value_mean (current V over the counted tokens), tokens (their count).
//
// They end, as PolicyMetrics do, with the correction's metrics and the mismatch of π_old against the
// behaviour log-probs.
var PPOMetrics = withCorrection([]string{"pg_loss", "value_loss", "value_clip_frac", "entropy", "clip_frac", "clip_frac_low",
	"clip_frac_high", "kl", "approx_kl", "ratio_mean", "tis_truncated_frac", "value_mean", "tokens"})

// PPO is the Proximal Policy Optimization objective with a value-head critic (Schulman et al. 2017,
// "Proximal Policy Optimization Algorithms"; advantages by GAE, Schulman et al. 2016, "High-Dimensional
// Continuous Control Using Generalized Advantage Estimation", computed by the caller with
// advantage.GAE). The actor and the critic share the trunk: the logits and the values are read off
// the same hidden states, so one forward pass serves both. Per counted token t:
//
//	r_t   = π_θ(y_t)/π_old(y_t)
//	pg_t  = −min(r_t·Â_t, clip(r_t, 1−ε_low, 1+ε_high)·Â_t)              (loss.ClippedSurrogate)
//	vf_t  = ½·max((V_t − R_t)², (clip(V_t, V^old_t ± ε_v) − R_t)²)         (loss.ValueLoss)
//	loss  = Agg(pg + β·KL(π_θ‖π_ref)) + c_v·Agg(vf) − c_H·Agg(H(π_θ))      (loss.PolicyLoss)
//
// with Â_t the (whitened) GAE advantage and R_t = A_t + V^old_t the GAE return. ε_v = cfg.ValueClip,
// c_v = cfg.ValueCoef, c_H = cfg.EntropyCoef, β = cfg.KLBeta (0: no reference term; PPO for RLHF
// usually folds the KL into the token rewards instead, advantage.TokenRewards). cfg.Algorithm must
// be ppo.
//
// Its input is a PPOBatch (sequences aligned for next-token prediction as in Policy, so the value at
// position t is V(s_t), the state in which Targets[r][t] was sampled): the rows, the token-level
// advantages Â_t, the critic's V^old_t before the iteration's updates and the returns R_t, its
// regression targets. The behaviour log-probs are always read (the correction, when on, and the
// mismatch metrics), the reference ones with kl_beta > 0.
//
// The model must have a value head (model.Config.ValueHead).
func PPO(cfg losscfg.PolicyConfig) Objective {
	return Objective{
		Name:    fmt.Sprintf("ppo[%s vf=%g vclip=%g]", nameOf(cfg), cfg.ValueCoef, cfg.ValueClip),
		Metrics: PPOMetrics,
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			b := ppoIn(in)
			if !mc.ValueHead {
				panic("objective ppo: the model has no value_head (the critic)")
			}
			hidden := model.Hidden(scope, mc, b.tokens, b.positions, b.valid)
			logits := model.LMHead(scope, mc, hidden)
			return PPOLoss(cfg, loss.PolicyInputs{
				Logp: model.TokenLogProbs(logits, b.targets), OldLogp: b.old, BehaviourLogp: b.behaviour, RefLogp: b.ref,
				Advantages: b.adv, Mask: b.mask, Entropy: model.Entropy(logits),
				Values: model.ValueHead(scope, mc, hidden), OldValues: b.oldValues, Returns: b.returns,
			})
		},
	}
}

// PPOLoss is PPO's loss on per-token quantities (see PPO for the formula); PPO's Build feeds it the
// model's outputs, and tests feed it constants.
//
//	in.Logp, in.Entropy, in.Values: [rows, seq] (carry the gradient)
//	in.OldLogp, in.Advantages, in.Mask, in.OldValues, in.Returns: [rows, seq] (constants)
//	in.RefLogp (kl_beta > 0): [rows, seq]; in.BehaviourLogp: [rows, seq], required with a
//	correction (loss.correction or tis_threshold), and when given its mismatch is reported
//
// Metrics: PPOMetrics. Panics (graph code) when cfg is invalid, its algorithm is not ppo, an input is
// missing, or the advantages are not per token.
func PPOLoss(cfg losscfg.PolicyConfig, in loss.PolicyInputs) (*Node, map[string]*Node) {
	if cfg.Algorithm != losscfg.AlgoPPO {
		panic(fmt.Sprintf("objective ppo: loss.algorithm %q: want %q", cfg.Algorithm, losscfg.AlgoPPO))
	}
	for _, x := range []struct {
		name string
		n    *Node
	}{{"logp", in.Logp}, {"old", in.OldLogp}, {"adv", in.Advantages}, {"mask", in.Mask}, {"entropy", in.Entropy},
		{"values", in.Values}, {"old values", in.OldValues}, {"returns", in.Returns}} {
		if x.n == nil {
			panic("objective ppo: input " + x.name + " is nil")
		}
		if x.n.Rank() != 2 || !x.n.Shape().EqualDimensions(in.Logp.Shape()) {
			panic(fmt.Sprintf("objective ppo: %s has shape %s, want [rows, seq] like logp %s", x.name, x.n.Shape(), in.Logp.Shape()))
		}
	}
	pin := in
	if cfg.KLBeta <= 0 {
		pin.RefLogp = nil
	}
	if cfg.EntropyCoef == 0 {
		pin.Entropy = nil
	}
	l, lm := loss.PolicyLoss(cfg, pin)
	m := map[string]*Node(lm)
	agg := func(x *Node) *Node { return StopGradient(loss.Aggregate(x, in.Mask, cfg.Aggregation, cfg.MaxLen)) }
	if cfg.ValueCoef == 0 { // not trained, still reported: the critic's fit is worth watching
		vl, vm := loss.ValueLoss(in.Values, in.OldValues, in.Returns, in.Mask, cfg.ValueClip)
		m["value_loss"] = agg(vl)
		m["value_clip_frac"] = vm["value_clip_frac"]
	}
	m["entropy"] = agg(in.Entropy)
	clip := Add(m["clip_frac_low"], m["clip_frac_high"])
	if d, ok := m["clip_frac_dual"]; ok {
		clip = Add(clip, d)
	}
	m["clip_frac"] = clip
	m["value_mean"] = StopGradient(loss.Aggregate(in.Values, in.Mask, losscfg.AggTokenMean, 0))
	m["tokens"] = ReduceAllSum(loss.AsWeights(in.Mask, in.Logp))
	return l, m
}
