package loss

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// KLEstimator names one of Schulman's single-sample estimators of KL(π‖π_ref) ("Approximating KL
// divergence", 2020), for tokens sampled from π.
type KLEstimator string

const (
	// KLK1 = log(π/π_ref): unbiased, high variance, can be negative.
	KLK1 KLEstimator = "k1"
	// KLK2 = ½·(log(π/π_ref))²: biased (low bias near π_ref), low variance, ≥ 0.
	KLK2 KLEstimator = "k2"
	// KLK3 = π_ref/π − 1 − log(π_ref/π): unbiased, low variance, ≥ 0 (GRPO's choice).
	KLK3 KLEstimator = "k3"
)

// KLEstimators lists the valid estimators.
var KLEstimators = []KLEstimator{KLK1, KLK2, KLK3}

// Validate reports an unknown estimator with the allowed values.
func (e KLEstimator) Validate() error {
	for _, k := range KLEstimators {
		if e == k {
			return nil
		}
	}
	return fmt.Errorf("loss: kl estimator %q: allowed %q", string(e), KLEstimators)
}

// KLPenalty is the per-token estimate of KL(π_θ‖π_ref), with x = logp − refLogp = log(π_θ/π_ref):
//
//	k1 = x        k2 = ½x²        k3 = e^(−x) − 1 + x
//
//	logp, refLogp: [batch, seq] → [batch, seq] (unmasked; the caller multiplies by β and aggregates)
//
// refLogp is a constant (StopGradient is applied); the gradient flows through logp. For k3, x is
// clamped to [−20, 20] so e^(−x) stays finite in float32/bfloat16 (a no-op for any sane policy).
// Panics on an unknown estimator.
func KLPenalty(logp, refLogp *Node, est KLEstimator) *Node {
	checkSame("KLPenalty", logp, refLogp)
	x := Sub(logp, StopGradient(refLogp))
	switch est {
	case KLK1:
		return x
	case KLK2:
		return MulScalar(Square(x), 0.5)
	case KLK3:
		x = ClipScalar(x, -maxLogRatio, maxLogRatio)
		return Add(Sub(Exp(Neg(x)), OnesLike(x)), x)
	}
	panic(est.Validate())
}
