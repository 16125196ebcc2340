package loss

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// Train–inference mismatch: how far the trainer's log-probs of the sampled tokens, log π_trainer,
// are from the rollout engine's, log π_behaviour, that sampled them. A widening gap is the most
// reported cause of RL collapse (Yao et al. 2025; Liu, Li et al. 2025, "When Speed Kills Stability"),
// so it is logged every step. With d_t = log π_trainer(y_t) − log π_behaviour(y_t) over the counted
// tokens (the completion mask):
//
//	abs_mean  mean |d_t|                          abs_max   max |d_t| (0 with no token)
//	k3        mean e^{d_t} − 1 − d_t  (d clamped to ±20), Schulman's k3 estimate of
//	          KL(π_behaviour ‖ π_trainer) from tokens sampled by π_behaviour (E[e^d] = 1, E[−d] = KL);
//	          verl's rollout_corr k3 and slime's mismatch_k3_kl
//	out_frac  fraction of tokens whose ratio e^{d_t} is outside [0.5, 2]
//	tokens    the counted tokens
//
// Every figure is 0 for an empty batch. "Fresh" and "stale" rollouts (the policy version that
// sampled them equal to, or older than, the trainer's) are measured separately by masking.
const (
	MismatchAbsMean = "abs_mean"
	MismatchAbsMax  = "abs_max"
	MismatchK3      = "k3"
	MismatchOutFrac = "out_frac"
	MismatchTokens  = "tokens"
)

// MismatchPrefix prefixes the mismatch metric names in a step's metrics ("mismatch_abs_mean"...).
const MismatchPrefix = "mismatch_"

// MismatchLow and MismatchHigh bound the ratios out_frac counts as in range, [0.5, 2].
const (
	MismatchLow  = 0.5
	MismatchHigh = 2.0
)

// MismatchNames are the metric names of a mismatch measurement under prefix, in reporting order.
func MismatchNames(prefix string) []string {
	return []string{prefix + MismatchAbsMean, prefix + MismatchAbsMax, prefix + MismatchK3,
		prefix + MismatchOutFrac, prefix + MismatchTokens}
}

// MismatchStats accumulates mismatch over tokens as sums, so that micro-batches, shards and steps
// merge exactly (Merge) before the means are taken. The zero value is an empty measurement.
type MismatchStats struct {
	Tokens int     `json:"tokens"`
	SumAbs float64 `json:"sum_abs"`
	MaxAbs float64 `json:"max_abs"`
	SumK3  float64 `json:"sum_k3"`
	Out    int     `json:"out"` // tokens with a ratio outside [MismatchLow, MismatchHigh]
}

// MismatchOf measures trainer against behaviour log-probs of the same tokens, in float64. mask marks
// the counted tokens (nil: all of them; an agentic rollout's Policy mask leaves tool output out).
func MismatchOf[T float32 | float64](trainer, behaviour []T, mask []bool) (MismatchStats, error) {
	if len(trainer) != len(behaviour) {
		return MismatchStats{}, fmt.Errorf("loss: mismatch: %d trainer log-probs, %d behaviour log-probs", len(trainer), len(behaviour))
	}
	if mask != nil && len(mask) != len(trainer) {
		return MismatchStats{}, fmt.Errorf("loss: mismatch: mask has %d entries for %d log-probs", len(mask), len(trainer))
	}
	lnLow, lnHigh := math.Log(MismatchLow), math.Log(MismatchHigh)
	var s MismatchStats
	for i := range trainer {
		if mask != nil && !mask[i] {
			continue
		}
		d := float64(trainer[i]) - float64(behaviour[i])
		s.Tokens++
		s.SumAbs += math.Abs(d)
		s.MaxAbs = math.Max(s.MaxAbs, math.Abs(d))
		dc := math.Min(math.Max(d, -maxLogRatio), maxLogRatio)
		s.SumK3 += math.Expm1(dc) - dc
		if d < lnLow || d > lnHigh {
			s.Out++
		}
	}
	return s, nil
}

// Merge is the measurement over the tokens of s and o together.
func (s MismatchStats) Merge(o MismatchStats) MismatchStats {
	return MismatchStats{Tokens: s.Tokens + o.Tokens, SumAbs: s.SumAbs + o.SumAbs, MaxAbs: math.Max(s.MaxAbs, o.MaxAbs),
		SumK3: s.SumK3 + o.SumK3, Out: s.Out + o.Out}
}

func (s MismatchStats) mean(x float64) float64 {
	if s.Tokens == 0 {
		return 0
	}
	return x / float64(s.Tokens)
}

// AbsMean is the mean |log π_trainer − log π_behaviour| per token.
func (s MismatchStats) AbsMean() float64 { return s.mean(s.SumAbs) }

// K3 is the mean k3 estimate of KL(π_behaviour ‖ π_trainer) per token.
func (s MismatchStats) K3() float64 { return s.mean(s.SumK3) }

// OutFrac is the fraction of tokens whose ratio is outside [0.5, 2].
func (s MismatchStats) OutFrac() float64 { return s.mean(float64(s.Out)) }

// Metrics are s's figures named as MismatchNames(prefix).
func (s MismatchStats) Metrics(prefix string) map[string]float64 {
	return map[string]float64{prefix + MismatchAbsMean: s.AbsMean(), prefix + MismatchAbsMax: s.MaxAbs,
		prefix + MismatchK3: s.K3(), prefix + MismatchOutFrac: s.OutFrac(), prefix + MismatchTokens: float64(s.Tokens)}
}

// MismatchMetrics is the graph form of MismatchOf for a step that has both log-probs in its graph,
// reported as one step's figures named MismatchNames(prefix). Inputs are constants (StopGradient).
// Means over several steps are not means over their tokens: merge MismatchStats for those, or weight
// each step's means by its tokens (and take the max of abs_max).
//
//	trainerLogp, behaviourLogp, mask: [batch, seq] → Metrics (scalars)
//
// The graph computes in the inputs' dtype and tests the [0.5, 2] bounds on the log side, so it agrees
// with MismatchOf up to rounding (and at the bounds themselves up to rounding of d).
func MismatchMetrics(trainerLogp, behaviourLogp, mask *Node, prefix string) Metrics {
	checkSame("MismatchMetrics", trainerLogp, behaviourLogp)
	checkSame("MismatchMetrics", trainerLogp, mask)
	g, dt := trainerLogp.Graph(), trainerLogp.DType()
	d := StopGradient(Sub(trainerLogp, behaviourLogp))
	w := AsWeights(mask, d)
	counted := GreaterThan(w, ScalarZero(g, dt))
	abs := Abs(d)
	dc := ClipScalar(d, -maxLogRatio, maxLogRatio)
	out := LogicalOr(LessThan(d, Scalar(g, dt, math.Log(MismatchLow))), GreaterThan(d, Scalar(g, dt, math.Log(MismatchHigh))))
	return Metrics{
		prefix + MismatchAbsMean: tokenMean(abs, w),
		prefix + MismatchAbsMax:  ReduceAllMax(Where(counted, abs, ZerosLike(abs))),
		prefix + MismatchK3:      tokenMean(Sub(Expm1(dc), dc), w),
		prefix + MismatchOutFrac: tokenMean(ConvertDType(out, dt), w),
		prefix + MismatchTokens:  ReduceAllSum(w),
	}
}
