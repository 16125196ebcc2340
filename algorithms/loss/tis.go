package loss

import (
	"math"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/support/exceptions"
)

// TISWeights are truncated importance-sampling weights for rollouts that were not sampled from the
// trainer's π_old: stale policies in async RL, or an inference engine whose numerics differ from the
// trainer's (Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL training"):
//
//	w_t = min(π_old(y_t)/π_behaviour(y_t), C) = min(exp(oldLogp_t − behaviourLogp_t), C)
//
// w is a constant (no gradient) that multiplies the per-token policy-gradient surrogate, so the
// gradient estimate is E_{y~π_behaviour}[w·∇ℓ]; truncation at C bounds its variance at the cost of a
// small bias. The minimum is taken on the log side, so huge ratios never become Inf.
//
//	oldLogp, behaviourLogp, mask: [batch, seq]; threshold C > 0 → w: [batch, seq]
//
// Metrics (token-means over mask): tis_truncated_frac (w = C, i.e. ratio > C), tis_weight_mean.
func TISWeights(oldLogp, behaviourLogp, mask *Node, threshold float64) (w *Node, m Metrics) {
	checkSame("TISWeights", oldLogp, behaviourLogp)
	checkSame("TISWeights", oldLogp, mask)
	if !(threshold > 0) {
		exceptions.Panicf("loss: TISWeights: threshold %g: must be > 0", threshold)
	}
	logC := math.Log(threshold)
	logRatio := StopGradient(Sub(oldLogp, behaviourLogp))
	w = Exp(MinScalar(logRatio, logC))
	mw := AsWeights(mask, w)
	g := w.Graph()
	m = Metrics{
		"tis_truncated_frac": tokenMean(ConvertDType(GreaterThan(logRatio, Scalar(g, w.DType(), logC)), w.DType()), mw),
		"tis_weight_mean":    tokenMean(w, mw),
	}
	return w, m
}
