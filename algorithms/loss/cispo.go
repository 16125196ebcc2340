package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// CISPOSurrogate is Clipped IS-weight Policy Optimization's loss per token (MiniMax-M1, arXiv
// 2506.13585, eq. 4–5):
//
//	r_t = π_θ(y_t)/π_old(y_t) = exp(logp_t − oldLogp_t)
//	ℓ_t = −sg(clip(r_t, 1−ε_low, 1+ε_high))·A_t·log π_θ(y_t)
//
// Where PPO/GRPO clip the update (a token whose ratio left the range in the advantage's direction has
// no gradient), CISPO clips the importance weight and stops its gradient, so every token keeps
// ∂ℓ_t/∂logp_t = −clip(r_t)·A_t: the rare, high-ratio tokens of reflective reasoning ("wait",
// "recheck") are damped, never dropped. The paper sets no lower bound (ε_low large; here 1, a floor
// of 0) and normalises by the batch's token count (Aggregate with AggTokenMean): see
// losscfg.DefaultPolicyConfig("cispo"). verl's compute_policy_loss_cispo and slime's
// compute_cispo_loss are the same formula.
//
// The value of ℓ is a surrogate (−w·A·log π, not a quantity to read); its gradient is the point.
//
//	logp, oldLogp, mask: [batch, seq]; adv: [batch] or [batch, seq] → perToken: [batch, seq] (unmasked;
//	reduce it with Aggregate)
//
// oldLogp is a constant; |logp − oldLogp| is clamped at 20 before exp. Metrics (token-means over mask):
// clip_frac_low (r < 1−ε_low) and clip_frac_high (r > 1+ε_high), whatever the advantage's sign since
// the weight is clipped either way; approx_kl (k3 estimate of KL(π_old‖π_θ)); ratio_mean.
func CISPOSurrogate(logp, oldLogp, adv, mask *Node, epsLow, epsHigh float64) (perToken *Node, m Metrics) {
	checkSame("CISPOSurrogate", logp, oldLogp)
	checkSame("CISPOSurrogate", logp, mask)
	a := tokenAdvantages(adv, logp)
	logRatio := ClipScalar(Sub(logp, StopGradient(oldLogp)), -maxLogRatio, maxLogRatio)
	ratio := Exp(logRatio)
	weight := StopGradient(ClipScalar(ratio, 1-epsLow, 1+epsHigh))
	perToken = Neg(Mul(Mul(weight, a), logp))
	w := AsWeights(mask, logp)
	g, dt := logp.Graph(), logp.DType()
	ind := func(cond *Node) *Node { return tokenMean(StopGradient(ConvertDType(cond, dt)), w) }
	m = Metrics{
		"approx_kl":      tokenMean(approxKL(logRatio), w),
		"ratio_mean":     tokenMean(StopGradient(ratio), w),
		"clip_frac_low":  ind(LessThan(ratio, Scalar(g, dt, 1-epsLow))),
		"clip_frac_high": ind(GreaterThan(ratio, Scalar(g, dt, 1+epsHigh))),
	}
	return perToken, m
}
