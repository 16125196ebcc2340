package losscfg

import (
	"fmt"
	"math"
	"slices"
)

// Algorithm names for PolicyConfig.Algorithm.
const (
	AlgoGRPO        = "grpo"
	AlgoDrGRPO      = "dr_grpo"
	AlgoDAPO        = "dapo"
	AlgoGSPO        = "gspo"
	AlgoRLOO        = "rloo"
	AlgoReinforcePP = "reinforce_pp"
	AlgoPPO         = "ppo"
	AlgoCISPO       = "cispo"
)

// Algorithms lists the valid PolicyConfig.Algorithm values.
var Algorithms = []string{AlgoGRPO, AlgoDrGRPO, AlgoDAPO, AlgoGSPO, AlgoRLOO, AlgoReinforcePP, AlgoPPO, AlgoCISPO}

// PolicyConfig selects and tunes the policy loss. The algorithms share one surrogate and differ in their
// defaults (below) and in their advantages (package advantage); gspo (sequence-level ratio) and cispo
// (stop-gradient clipped IS weight times log-prob, no token dropped) change the surrogate itself. The
// `default` tags are GRPO's; DefaultPolicyConfig gives each algorithm's:
//
//	algorithm     clip_low clip_high kl_beta aggregation              advantages (package advantage)
//	grpo          0.2      0.2       0.04    seq-mean-token-mean      GRPO (group z-score)
//	dr_grpo       0.2      0.2       0       seq-mean-token-sum-norm  DrGRPO (group mean only)
//	dapo          0.2      0.28      0       token-mean               GRPO + FilterGroups + ShapeOverlong
//	gspo          3e-4     4e-4      0       seq-mean-token-mean      GRPO
//	rloo          0.2      0.2       0       seq-mean-token-sum       RLOO (KL, if any, in the reward)
//	reinforce_pp  0.2      0.2       0       token-mean               ReinforcePP (KL in the reward)
//	ppo           0.2      0.2       0       token-mean               GAE; value_coef 0.5, value_clip 0.2
//	cispo         1        3         0       token-mean               GRPO
//
// cispo's clip bounds the IS weight, not the update: clip_low 1 is no lower bound (MiniMax-M1 sets
// none) and clip_high 3 caps the weight at 4 (ScaleRL's ε_max, Tinker's CISPO default).
//
// kl_estimator defaults to k3 (GRPO's) everywhere; the correction block is unset (no correction) and
// tis_threshold and entropy_coef default to 0 (off).
type PolicyConfig struct {
	Algorithm   string  `json:"algorithm" default:"grpo" help:"grpo | dr_grpo | dapo | gspo | rloo | reinforce_pp | ppo | cispo; other fields default per algorithm (losscfg.DefaultPolicyConfig)"`
	ClipLow     float64 `json:"clip_low" default:"0.2" help:"ε_low: the ratio is clipped below at 1−ε_low (gspo: sequence ratio, ~3e-4; cispo: the IS weight, 1 = no lower bound)"`
	ClipHigh    float64 `json:"clip_high" default:"0.2" help:"ε_high: the ratio is clipped above at 1+ε_high; > clip_low is DAPO's clip-higher (dapo 0.28, gspo ~4e-4; cispo: the IS weight is capped at 1+clip_high, default 3)"`
	DualClip    float64 `json:"dual_clip" default:"0" help:"dual-clip c > 1+clip_high caps the loss of negative-advantage tokens at −c·A (typical 3; not used by gspo); 0 = off"`
	KLBeta      float64 `json:"kl_beta" default:"0.04" help:"β of the per-token KL(π‖π_ref) penalty in the loss; 0 = off (no reference model needed)"`
	KLEstimator string  `json:"kl_estimator" default:"k3" help:"k1 | k2 | k3 (Schulman's estimators; k3 is GRPO's)"`
	Aggregation AggMode `json:"aggregation" default:"seq-mean-token-mean" help:"token-mean | seq-mean-token-mean | seq-mean-token-sum | seq-mean-token-sum-norm"`
	MaxLen      int     `json:"max_len" default:"0" help:"constant divisor of seq-mean-token-sum-norm (the generation budget); 0 = the padded sequence length"`
	// Correction is the off-policy correction of rollouts π_old did not sample (see Correction).
	Correction Correction `json:"correction" help:"off-policy correction of rollouts π_old did not sample (stale versions, sampler numerics): {mode, low, high}"`
	// TISThreshold is the deprecated spelling of Correction{Mode: tis, High: TISThreshold}; setting
	// both is an error.
	TISThreshold float64 `json:"tis_threshold" default:"0" help:"deprecated alias of correction {mode: tis, high: C}: C ≥ 1 of truncated importance sampling min(π_old/π_behaviour, C); 0 = off"`
	EntropyCoef  float64 `json:"entropy_coef" default:"0" help:"coefficient of the entropy bonus (subtracted from the loss); 0 = off"`
	ValueCoef    float64 `json:"value_coef" default:"0" help:"coefficient of the clipped value loss (ppo: 0.5); 0 = no critic in this loss"`
	ValueClip    float64 `json:"value_clip" default:"0" help:"ε_v: values move at most this far from the old values (ppo: 0.2); 0 = unclipped"`
}

// DefaultPolicyConfig returns the defaults of algorithm (see PolicyConfig). An unknown algorithm gets
// GRPO's values with its name kept, so Validate reports it.
func DefaultPolicyConfig(algorithm string) PolicyConfig {
	c := PolicyConfig{Algorithm: algorithm, ClipLow: 0.2, ClipHigh: 0.2, KLBeta: 0.04, KLEstimator: string(KLK3),
		Aggregation: AggSeqMeanTokenMean}
	switch algorithm {
	case AlgoDrGRPO:
		c.KLBeta, c.Aggregation = 0, AggSeqMeanTokenSumNorm
	case AlgoDAPO:
		c.ClipHigh, c.KLBeta, c.Aggregation = 0.28, 0, AggTokenMean
	case AlgoGSPO:
		c.ClipLow, c.ClipHigh, c.KLBeta = 3e-4, 4e-4, 0
	case AlgoRLOO:
		c.KLBeta, c.Aggregation = 0, AggSeqMeanTokenSum
	case AlgoReinforcePP:
		c.KLBeta, c.Aggregation = 0, AggTokenMean
	case AlgoPPO:
		c.KLBeta, c.Aggregation, c.ValueCoef, c.ValueClip = 0, AggTokenMean, 0.5, 0.2
	case AlgoCISPO:
		// MiniMax-M1 (arXiv 2506.13585, eq. 4): the loss is normalised by the batch's token count,
		// and "we did not impose a lower bound on the IS weight" (ε_low large: 1 makes it 0 here).
		c.ClipLow, c.ClipHigh, c.KLBeta, c.Aggregation = 1, 3, 0, AggTokenMean
	}
	return c
}

// EffectiveCorrection is the correction the loss applies, defaults filled in: Correction, or
// {tis, high: TISThreshold} when only the deprecated alias is set, or none. Call it on a valid config.
func (c PolicyConfig) EffectiveCorrection() Correction {
	if c.Correction.Mode == "" && c.TISThreshold > 0 {
		return Correction{Mode: CorrectionTIS, High: c.TISThreshold}
	}
	return c.Correction.WithDefaults()
}

// CorrectionSet reports whether the config chose a correction itself (an explicit correction.mode,
// none included, or tis_threshold), as opposed to leaving a workflow free to pick one (e.g. TIS for
// stale rollouts in async mode).
func (c PolicyConfig) CorrectionSet() bool { return c.Correction.Mode != "" || c.TISThreshold != 0 }

// Validate names the first bad field and its allowed values.
func (c PolicyConfig) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("loss: policy config %s=%v: %s", field, v, want)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !slices.Contains(Algorithms, c.Algorithm):
		return bad("algorithm", fmt.Sprintf("%q", c.Algorithm), fmt.Sprintf("allowed %q", Algorithms))
	case c.Algorithm == AlgoCISPO && (!finite(c.ClipLow) || c.ClipLow < 0 || c.ClipLow > 1):
		return bad("clip_low", c.ClipLow, "cispo: must be in [0, 1] (1 = no lower bound on the IS weight)")
	case c.Algorithm != AlgoCISPO && (!finite(c.ClipLow) || c.ClipLow < 0 || c.ClipLow >= 1):
		return bad("clip_low", c.ClipLow, "must be in [0, 1)")
	case !finite(c.ClipHigh) || c.ClipHigh < 0:
		return bad("clip_high", c.ClipHigh, "must be ≥ 0")
	case c.Algorithm == AlgoCISPO && c.DualClip != 0:
		return bad("dual_clip", c.DualClip, "cispo has no dual clip (its gradient is never dropped); must be 0")
	case !finite(c.DualClip) || (c.DualClip != 0 && c.DualClip <= 1+c.ClipHigh):
		return bad("dual_clip", c.DualClip, fmt.Sprintf("must be 0 (off) or > 1+clip_high = %g", 1+c.ClipHigh))
	case !finite(c.KLBeta) || c.KLBeta < 0:
		return bad("kl_beta", c.KLBeta, "must be ≥ 0 (0 = off)")
	case KLEstimator(c.KLEstimator).Validate() != nil:
		return bad("kl_estimator", fmt.Sprintf("%q", c.KLEstimator), fmt.Sprintf("allowed %q", KLEstimators))
	case c.Aggregation.Validate() != nil:
		return bad("aggregation", fmt.Sprintf("%q", string(c.Aggregation)), fmt.Sprintf("allowed %q", AggModes))
	case c.MaxLen < 0:
		return bad("max_len", c.MaxLen, "must be ≥ 0 (0 = padded sequence length)")
	case !finite(c.TISThreshold) || (c.TISThreshold != 0 && c.TISThreshold < 1):
		return bad("tis_threshold", c.TISThreshold, "must be 0 (off) or ≥ 1")
	case c.TISThreshold != 0 && c.Correction.Mode != "":
		return bad("tis_threshold", c.TISThreshold, fmt.Sprintf(
			"is the deprecated alias of correction {mode: tis, high: %g}; set correction.mode=%q or tis_threshold, not both",
			c.TISThreshold, c.Correction.Mode))
	case c.Correction.Validate() != nil:
		return c.Correction.Validate()
	case !finite(c.EntropyCoef):
		return bad("entropy_coef", c.EntropyCoef, "must be finite")
	case !finite(c.ValueCoef) || c.ValueCoef < 0:
		return bad("value_coef", c.ValueCoef, "must be ≥ 0 (0 = off)")
	case !finite(c.ValueClip) || c.ValueClip < 0:
		return bad("value_clip", c.ValueClip, "must be ≥ 0 (0 = unclipped)")
	}
	return nil
}

// AggMode says how per-token losses [batch, seq] become one scalar. The choice decides how much
// each token and each sequence weighs in the gradient, which is where GRPO, DAPO and Dr. GRPO differ.
type AggMode string

const (
	// AggTokenMean: Σ_{i,t} m·x / Σ_{i,t} m — every counted token of the batch weighs the same
	// (DAPO's "token-level policy gradient loss"; PPO as usually implemented).
	AggTokenMean AggMode = "token-mean"
	// AggSeqMeanTokenMean: mean over rows of (Σ_t m·x / Σ_t m) — every sequence weighs the same,
	// and a token weighs 1/|y_i| (the original GRPO objective, and GSPO's).
	AggSeqMeanTokenMean AggMode = "seq-mean-token-mean"
	// AggSeqMeanTokenSum: mean over rows of Σ_t m·x — a sequence-level REINFORCE loss.
	AggSeqMeanTokenSum AggMode = "seq-mean-token-sum"
	// AggSeqMeanTokenSumNorm: mean over rows of Σ_t m·x / maxLen with a constant maxLen (Dr. GRPO):
	// no per-row length normalisation, so the loss carries no length bias. This is Dr. GRPO's
	// objective and its reference code (oat); verl's mode of the same name sums over rows instead
	// of averaging, a batch-size factor.
	AggSeqMeanTokenSumNorm AggMode = "seq-mean-token-sum-norm"
)

// AggModes lists the valid aggregation modes.
var AggModes = []AggMode{AggTokenMean, AggSeqMeanTokenMean, AggSeqMeanTokenSum, AggSeqMeanTokenSumNorm}

// Validate reports an unknown mode with the allowed values.
func (m AggMode) Validate() error {
	for _, a := range AggModes {
		if m == a {
			return nil
		}
	}
	return fmt.Errorf("loss: aggregation %q: allowed %q", string(m), AggModes)
}

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
