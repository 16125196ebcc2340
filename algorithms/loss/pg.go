package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// maxLogRatio bounds |log π/π_old| before exponentiating, so a stale or broken token gives a large
// finite ratio instead of Inf/NaN (e^20 ≈ 4.9e8, far outside any clip range). verl does the same.
const maxLogRatio = 20

// ClippedSurrogate is the PPO clipped policy-gradient loss per token (Schulman et al. 2017), as used by
// GRPO (Shao et al. 2024) and DAPO (Yu et al. 2025):
//
//	r_t = π_θ(y_t)/π_old(y_t) = exp(logp_t − oldLogp_t)
//	ℓ_t = −min(r_t·A_t, clip(r_t, 1−ε_low, 1+ε_high)·A_t)
//
// ε_high > ε_low is DAPO's clip-higher (more room for low-probability tokens to grow). dualClip = c > 1
// adds dual-clip PPO (Ye et al. 2020): for A_t < 0 the loss is capped at −c·A_t, so a token whose
// ratio has run past c stops pushing; dualClip ≤ 0 turns it off.
//
//	logp, oldLogp, mask: [batch, seq]; adv: [batch] (one advantage per sequence, broadcast over its
//	tokens) or [batch, seq] → perToken: [batch, seq] (unmasked; reduce it with Aggregate)
//
// oldLogp is a constant (StopGradient is applied). |logp − oldLogp| is clamped at 20 before exp.
// ∂ℓ_t/∂logp_t is −A_t·r_t where the unclipped term is the active one (r_t inside the clip range, or
// outside it on the side where clipping would not lower the loss: A>0 with r<1−ε_low, A<0 with
// r>1+ε_high) and 0 where clipping is active (A>0 with r>1+ε_high, A<0 with r<1−ε_low, dual clip).
//
// Metrics (token-means over mask): clip_frac_low (A<0, r<1−ε_low: clipped, no gradient),
// clip_frac_high (A>0, r>1+ε_high), clip_frac_dual (A<0, r>c), approx_kl (k3 estimate of
// KL(π_old‖π_θ): (r−1) − log r), ratio_mean.
func ClippedSurrogate(logp, oldLogp, adv, mask *Node, epsLow, epsHigh, dualClip float64) (perToken *Node, m Metrics) {
	checkSame("ClippedSurrogate", logp, oldLogp)
	checkSame("ClippedSurrogate", logp, mask)
	a := tokenAdvantages(adv, logp)
	logRatio := ClipScalar(Sub(logp, StopGradient(oldLogp)), -maxLogRatio, maxLogRatio)
	ratio := Exp(logRatio)
	perToken = clippedLoss(ratio, a, epsLow, epsHigh, dualClip)
	w := AsWeights(mask, logp)
	m = Metrics{
		"approx_kl":  tokenMean(approxKL(logRatio), w),
		"ratio_mean": tokenMean(StopGradient(ratio), w),
	}
	for _, c := range clipIndicators(ratio, a, epsLow, epsHigh, dualClip) {
		m[c.name] = tokenMean(c.ind, w)
	}
	return perToken, m
}

// clippedLoss is max(−A·r, −A·clip(r, 1−ε_low, 1+ε_high)), dual-clipped at −c·A for A < 0 when c > 0.
// Max sends the gradient to its first argument on ties, so inside the clip range (where both terms
// are equal) the unclipped term carries it.
func clippedLoss(ratio, a *Node, epsLow, epsHigh, dualClip float64) *Node {
	negA := Neg(a)
	loss := Max(Mul(negA, ratio), Mul(negA, ClipScalar(ratio, 1-epsLow, 1+epsHigh)))
	if dualClip > 0 {
		aNeg := LessThan(a, ScalarZero(a.Graph(), a.DType()))
		loss = Where(aNeg, Min(loss, MulScalar(negA, dualClip)), loss)
	}
	return loss
}

// clipIndicator is one named 0/1 indicator [batch, seq] of active clipping.
type clipIndicator struct {
	name string
	ind  *Node
}

// clipIndicators are the indicators of active clipping, in a fixed order (so the graph is the same on
// every build): clip_frac_low (A<0, r<1−ε_low), clip_frac_high (A>0, r>1+ε_high) and, when
// dualClip > 0, clip_frac_dual (A<0, r>c).
func clipIndicators(ratio, a *Node, epsLow, epsHigh, dualClip float64) []clipIndicator {
	g, dt := ratio.Graph(), ratio.DType()
	zero := ScalarZero(g, dt)
	aNeg, aPos := LessThan(a, zero), GreaterThan(a, zero)
	ind := func(cond *Node) *Node { return StopGradient(ConvertDType(cond, dt)) }
	out := []clipIndicator{
		{"clip_frac_low", ind(LogicalAnd(aNeg, LessThan(ratio, Scalar(g, dt, 1-epsLow))))},
		{"clip_frac_high", ind(LogicalAnd(aPos, GreaterThan(ratio, Scalar(g, dt, 1+epsHigh))))},
	}
	if dualClip > 0 {
		out = append(out, clipIndicator{"clip_frac_dual", ind(LogicalAnd(aNeg, GreaterThan(ratio, Scalar(g, dt, dualClip))))})
	}
	return out
}

// approxKL is the k3 estimate of KL(π_old‖π_θ) per token from r = π_θ/π_old: (r − 1) − log r ≥ 0.
func approxKL(logRatio *Node) *Node {
	lr := StopGradient(logRatio)
	r := Exp(lr)
	return Sub(Sub(r, OnesLike(r)), lr)
}

// tokenAdvantages broadcasts [batch] advantages over the sequence axis of like [batch, seq], or checks
// [batch, seq] ones; the result is a constant in like's dtype.
func tokenAdvantages(adv, like *Node) *Node {
	if adv.DType() != like.DType() {
		adv = ConvertDType(adv, like.DType())
	}
	switch {
	case adv.Rank() == 1 && adv.Shape().Dim(0) == like.Shape().Dim(0):
		adv = BroadcastToDims(ExpandAxes(adv, -1), like.Shape().Dimensions...)
	case adv.Rank() == 2 && adv.Shape().EqualDimensions(like.Shape()):
	default:
		exceptions.Panicf("loss: advantages %s: want [batch] or [batch, seq] matching %s", adv.Shape(), like.Shape())
	}
	return StopGradient(adv)
}

// PolicyInputs are the graph inputs of PolicyLoss; every tensor is [batch, seq] unless said otherwise.
type PolicyInputs struct {
	Logp    *Node // log π_θ of the sampled response tokens (the only input that carries a gradient)
	OldLogp *Node // log π_old (trainer's recomputation before this step's updates); nil: on-policy, StopGradient(Logp)
	// BehaviourLogp are the rollout engine's log-probs of the same tokens; required when a correction
	// is on (PolicyConfig.EffectiveCorrection), and when given the mismatch metrics are reported.
	BehaviourLogp *Node
	RefLogp       *Node // log π_ref; required when KLBeta > 0
	Advantages    *Node // [batch] (sequence-level) or [batch, seq] (token-level)
	Mask          *Node // 1 on response tokens, 0 on prompt and padding (Bool or numeric)
	Entropy       *Node // policy entropy per token; required when EntropyCoef ≠ 0
	// Values (current critic, differentiable), OldValues and Returns (constants); required when ValueCoef > 0.
	Values, OldValues, Returns *Node
}

// PolicyLoss is the whole policy objective a trainer minimises for one micro-batch:
//
//	ℓ_t  = w_t·surrogate_t + β·KL_t           (w_t: correction weight, 1 when none; KL_t per KLEstimator)
//	loss = Agg(ℓ) − entropy_coef·Agg(H) + value_coef·Agg(ValueLoss)
//
// with surrogate_t = ClippedSurrogate, GSPOSurrogate for gspo or CISPOSurrogate for cispo, and Agg =
// Aggregate under the correction's keep mask (the completion mask less the tokens mis and geo_mask
// reject; see OffPolicyCorrection). The weight corrects only the policy-gradient term (it is the
// off-policy correction of the sampled actions; the KL and value terms are evaluated on the same
// tokens and need none). The correction reads π_old (OldLogp, or StopGradient(Logp) when on-policy)
// against BehaviourLogp. Panics when cfg is invalid or an input it needs is nil.
//
// Metrics: loss, pg_loss (aggregated surrogate, correction-weighted), the surrogate's metrics, kl
// (token-mean of KL_t, when β > 0), the correction's (tis_* or corr_*, when on), entropy (aggregated,
// when on), value_loss and value_clip_frac (when on), and with BehaviourLogp the mismatch of π_old
// against it under the completion mask (MismatchMetrics, prefix MismatchPrefix).
func PolicyLoss(cfg losscfg.PolicyConfig, in PolicyInputs) (*Node, Metrics) {
	oldLogp := policyInputs(cfg, in)
	corr := cfg.EffectiveCorrection()
	mask := in.Mask // the loss mask: the completion mask less rejected tokens
	var weight *Node
	var cm Metrics
	switch corr.Mode {
	case losscfg.CorrectionNone:
	case losscfg.CorrectionTIS:
		// tis leaves the mask as it is: computed after the surrogate below, in the order (and so to the
		// bit) of the tis_threshold code it replaces.
	default:
		need(in.BehaviourLogp, "BehaviourLogp", "correction mode "+corr.Mode+" is on")
		weight, mask, cm = OffPolicyCorrection(oldLogp, in.BehaviourLogp, in.Mask, corr)
	}
	agg := func(x *Node) *Node { return Aggregate(x, mask, cfg.Aggregation, cfg.MaxLen) }

	var perToken *Node
	var m Metrics
	switch cfg.Algorithm {
	case losscfg.AlgoGSPO:
		perToken, m = GSPOSurrogate(in.Logp, oldLogp, in.Advantages, mask, cfg.ClipLow, cfg.ClipHigh)
	case losscfg.AlgoCISPO:
		perToken, m = CISPOSurrogate(in.Logp, oldLogp, in.Advantages, mask, cfg.ClipLow, cfg.ClipHigh)
	default:
		perToken, m = ClippedSurrogate(in.Logp, oldLogp, in.Advantages, mask, cfg.ClipLow, cfg.ClipHigh, cfg.DualClip)
	}
	if corr.Mode == losscfg.CorrectionTIS {
		need(in.BehaviourLogp, "BehaviourLogp", "correction mode tis is on (or tis_threshold > 0)")
		weight, cm = TISWeights(oldLogp, in.BehaviourLogp, in.Mask, corr.High)
	}
	if weight != nil {
		perToken = Mul(perToken, weight)
	}
	for k, v := range cm {
		m[k] = v
	}
	m["pg_loss"] = agg(perToken)
	if cfg.KLBeta > 0 {
		need(in.RefLogp, "RefLogp", "kl_beta > 0")
		kl := KLPenalty(in.Logp, in.RefLogp, losscfg.KLEstimator(cfg.KLEstimator))
		perToken = Add(perToken, MulScalar(kl, cfg.KLBeta))
		m["kl"] = tokenMean(StopGradient(kl), mask)
	}
	loss := agg(perToken)
	if cfg.EntropyCoef != 0 {
		need(in.Entropy, "Entropy", "entropy_coef ≠ 0")
		loss = Add(loss, EntropyBonus(in.Entropy, mask, cfg.EntropyCoef, cfg.Aggregation, cfg.MaxLen))
		m["entropy"] = StopGradient(agg(in.Entropy))
	}
	if cfg.ValueCoef > 0 {
		need(in.Values, "Values", "value_coef > 0")
		need(in.OldValues, "OldValues", "value_coef > 0")
		need(in.Returns, "Returns", "value_coef > 0")
		vl, vm := ValueLoss(in.Values, in.OldValues, in.Returns, mask, cfg.ValueClip)
		v := agg(vl)
		loss = Add(loss, MulScalar(v, cfg.ValueCoef))
		m["value_loss"] = StopGradient(v)
		for k, x := range vm {
			m[k] = x
		}
	}
	if in.BehaviourLogp != nil {
		for k, x := range MismatchMetrics(oldLogp, in.BehaviourLogp, in.Mask, MismatchPrefix) {
			m[k] = x
		}
	}
	m["loss"] = StopGradient(loss)
	m["pg_loss"] = StopGradient(m["pg_loss"])
	return loss, m
}

// policyInputs panics when cfg is invalid or in lacks an input every policy loss needs, and returns
// π_old's log-probabilities: OldLogp, or StopGradient(Logp) when on-policy.
func policyInputs(cfg losscfg.PolicyConfig, in PolicyInputs) *Node {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	need(in.Logp, "Logp", "it is always needed")
	need(in.Advantages, "Advantages", "they are always needed")
	need(in.Mask, "Mask", "it is always needed")
	oldLogp := in.OldLogp
	if oldLogp == nil {
		oldLogp = StopGradient(in.Logp)
	}
	return oldLogp
}

// need panics naming the PolicyInputs field name, nil although why needs it.
func need(x *Node, name, why string) {
	if x == nil {
		exceptions.Panicf("loss: PolicyLoss: %s is nil but %s", name, why)
	}
}
