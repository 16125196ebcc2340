package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// KLPenalty is the per-token estimate of KL(π_θ‖π_ref), with x = logp − refLogp = log(π_θ/π_ref):
//
//	k1 = x        k2 = ½x²        k3 = e^(−x) − 1 + x
//
//	logp, refLogp: [batch, seq] → [batch, seq] (unmasked; the caller multiplies by β and aggregates)
//
// refLogp is a constant (StopGradient is applied); the gradient flows through logp. For k3, x is
// clamped to [−20, 20] so e^(−x) stays finite in float32/bfloat16 (a no-op for any sane policy).
// Panics on an unknown estimator.
func KLPenalty(logp, refLogp *Node, est losscfg.KLEstimator) *Node {
	checkSame("KLPenalty", logp, refLogp)
	x := Sub(logp, StopGradient(refLogp))
	switch est {
	case losscfg.KLK1:
		return x
	case losscfg.KLK2:
		return MulScalar(Square(x), 0.5)
	case losscfg.KLK3:
		x = ClipScalar(x, -maxLogRatio, maxLogRatio)
		return Add(Sub(Exp(Neg(x)), OnesLike(x)), x)
	}
	panic(est.Validate())
}
