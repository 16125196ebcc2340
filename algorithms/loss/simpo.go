package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// SimPO is Simple Preference Optimization with a reference-free reward (Meng et al. 2024, "SimPO:
// Simple Preference Optimization with a Reference-Free Reward"): the implicit reward is the
// length-normalised log-likelihood β/|y|·log πθ(y|x), and the Bradley–Terry objective asks the chosen
// reward to exceed the rejected one by a target margin γ:
//
//	z    = β/|y_w|·log πθ(y_w|x) − β/|y_l|·log πθ(y_l|x) − γ
//	loss = mean over pairs of  −(1−ε)·log σ(z) − ε·log σ(−z)
//
// with |y| the number of counted tokens and log πθ(y|x) their sum (so β/|y|·log πθ = β·SeqMean). ε = 0
// is the paper's loss; ε > 0 is the optional label smoothing of the authors' code (as in cDPO).
// Preference sets γ = GammaBetaRatio·β, the parameterisation the authors tune (β 2.0, γ/β 0.5).
//
// Inputs: see PrefPair (no reference model; RefChosen/RefRejected are ignored); β > 0, γ ≥ 0,
// 0 ≤ ε < 0.5. Returns the scalar loss and, as means over the non-padding pairs, rewards/chosen
// (β/|y_w|·log πθ(y_w|x)), rewards/rejected, rewards/margin (chosen − rejected, without γ) and
// rewards/accuracy (fraction of pairs with margin > 0).
func SimPO(p PrefPair, beta, gamma, labelSmoothing float64) (*Node, Metrics) {
	p.check("SimPO", false)
	w := p.rows()
	rc := MulScalar(SeqMean(p.Chosen, p.ChosenMask), beta)
	rr := MulScalar(SeqMean(p.Rejected, p.RejectedMask), beta)
	loss := prefRowMean(prefSigmoidLoss(AddScalar(Sub(rc, rr), -gamma), labelSmoothing), w)
	return loss, prefRewardMetrics(rc, rr, w)
}
