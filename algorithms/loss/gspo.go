package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// maxGSPOLogRatio bounds the token-form log-ratio before exp (verl clamps at 10 as well).
const maxGSPOLogRatio = 10

// GSPOSurrogate is Group Sequence Policy Optimization's loss (Zheng et al. 2025), in its token form.
// GSPO clips a length-normalised sequence ratio instead of per-token ratios:
//
//	s_i = (π_θ(y_i)/π_old(y_i))^(1/|y_i|) = exp((1/|y_i|) Σ_t (logp_it − oldLogp_it))
//	J   = (1/G) Σ_i min(s_i·A_i, clip(s_i, 1−ε_low, 1+ε_high)·A_i)
//
// This returns GSPO-token's per-token loss (paper §4.3), with s_it = sg[s_i]·π_θ(y_it)/sg[π_θ(y_it)]:
//
//	ℓ_it = −min(s_it·A_it, clip(s_it, 1−ε_low, 1+ε_high)·A_it)
//
// s_it equals s_i in value and ∇s_it = s_i·∇log π_θ(y_it), so with sequence-level advantages and
// Aggregate(·, AggSeqMeanTokenMean) the loss and its gradient are exactly GSPO's −J and −∇J
// (∇s_i = s_i·(1/|y_i|)Σ_t ∇log π_θ(y_it)); token-level advantages give GSPO-token. Other
// aggregations weight sequences by length and depart from the paper. The ε here are GSPO's (≈3e-4,
// 4e-4), orders of magnitude below token-level PPO's, because s_i is a geometric mean.
//
//	logp, oldLogp, mask: [batch, seq]; adv: [batch] or [batch, seq] → perToken: [batch, seq] (unmasked)
//
// The log-ratio is clamped at 10 above before exp. Metrics are sequence-level (the mean over rows
// with a counted token of the per-row token fraction, which for sequence-level advantages is the
// fraction of sequences): clip_frac_low, clip_frac_high, ratio_mean (of s_i); approx_kl is the
// token-mean k3 estimate of KL(π_old‖π_θ) with per-token ratios.
func GSPOSurrogate(logp, oldLogp, adv, mask *Node, epsLow, epsHigh float64) (perToken *Node, m Metrics) {
	checkSame("GSPOSurrogate", logp, oldLogp)
	checkSame("GSPOSurrogate", logp, mask)
	a := tokenAdvantages(adv, logp)
	w := AsWeights(mask, logp)
	tokLogRatio := Sub(logp, StopGradient(oldLogp))
	seqLogRatio := StopGradient(SeqMean(tokLogRatio, w)) // [batch]
	logS := Add(BroadcastToDims(ExpandAxes(seqLogRatio, -1), logp.Shape().Dimensions...),
		Sub(logp, StopGradient(logp)))
	s := Exp(MinScalar(logS, maxGSPOLogRatio))
	perToken = clippedLoss(s, a, epsLow, epsHigh, 0)

	seqLevel := func(x *Node) *Node { return rowMean(SeqMean(x, w), w) }
	m = Metrics{
		"ratio_mean": rowMean(Exp(seqLogRatio), w),
		"approx_kl":  tokenMean(approxKL(ClipScalar(tokLogRatio, -maxLogRatio, maxLogRatio)), w),
	}
	for _, c := range clipIndicators(s, a, epsLow, epsHigh, 0) {
		m[c.name] = seqLevel(c.ind)
	}
	return perToken, m
}
