package losscfg

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Correction modes for Correction.Mode.
const (
	CorrectionNone    = "none"
	CorrectionTIS     = "tis"
	CorrectionMIS     = "mis"
	CorrectionGeoMask = "geo_mask"
	CorrectionIcePop  = "icepop"
)

// CorrectionModes lists the valid Correction.Mode values ("" is also accepted: unset, see Correction).
var CorrectionModes = []string{CorrectionNone, CorrectionTIS, CorrectionMIS, CorrectionGeoMask, CorrectionIcePop}

// Correction is the off-policy correction of the policy-gradient term for rollouts that the trainer's
// π_old did not sample: a stale policy version (async RL) or a sampler whose numerics differ from the
// trainer's. Every mode reads the per-token ratio ρ_t = π_old(y_t)/π_behaviour(y_t) of the trainer's
// log-probs to the rollout engine's, and differs in what it does with it (package loss,
// OffPolicyCorrection, has the formulas and sources):
//
//	mode      bounds (0 = default)   effect on token t of sequence i
//	none      -                      nothing
//	tis       high C = 2             weight min(ρ_t, C)                      (truncated IS, token level)
//	mis       [0.5, 2]               weight ρ_t; t leaves the loss if ρ_t ∉ [low, high]   (masked IS)
//	geo_mask  [0.999, 1.001]         sequence i leaves the loss if (Π_t ρ_it)^(1/|y_i|) ∉ [low, high]
//	icepop    [0.5, 5]               weight ρ_t if ρ_t ∈ [low, high], else 0 (t stays in the denominators)
//
// "Leaves the loss" means the token is removed from the loss mask, so it counts in no denominator of
// the aggregation (nor in the KL, entropy and value terms), as verl's rejection sampling does; icepop
// zeroes the token's policy-gradient weight only, as the IcePop objective is written.
//
// Mode "" means unset and acts as none; unlike an explicit none it lets the deprecated tis_threshold
// alias (PolicyConfig.TISThreshold = C, meaning {mode: tis, high: C}) and a workflow's own default for
// stale rollouts apply. Low and High set to 0 take the mode's default; a mode that has no use for a
// bound refuses a non-zero one.
type Correction struct {
	Mode string  `json:"mode" default:"" help:"off-policy correction of the policy gradient: none | tis | mis | geo_mask | icepop; unset: none (tis_threshold, deprecated, is tis)"`
	Low  float64 `json:"low" default:"0" help:"lower ratio bound of mis, geo_mask, icepop (0: the mode's default, 0.5 / 0.999 / 0.5); tis and none take none"`
	High float64 `json:"high" default:"0" help:"upper ratio bound: tis truncation C ≥ 1 (default 2); mis 2, geo_mask 1.001, icepop 5 by default"`
}

// DefaultCorrectionBounds are mode's bounds when Low and High are 0 (low is 0 for modes without one).
//
//   - tis: C = 2, the value of Yao et al. 2025 ("Your Efficient RL Framework Secretly Brings You
//     Off-Policy RL Training") and verl's rollout_is_threshold default.
//   - mis: [0.5, 2], verl's and slime's token rejection-sampling example thresholds ("0.5_2.0").
//   - geo_mask: [0.999, 1.001], verl's Geo-RS bounds (docs/algo/rollout_corr_math.md §3.3.3): the
//     geometric mean is an average per-token drift, so its bounds are tight.
//   - icepop: [0.5, 5], the α and β of IcePop (Ring-1T report, arXiv 2510.18855), the paper defaults
//     that rllm (PR #741) and open-instruct (PR #1650) carry.
func DefaultCorrectionBounds(mode string) (low, high float64) {
	switch mode {
	case CorrectionTIS:
		return 0, 2
	case CorrectionMIS:
		return 0.5, 2
	case CorrectionGeoMask:
		return 0.999, 1.001
	case CorrectionIcePop:
		return 0.5, 5
	}
	return 0, 0
}

// Off reports whether c corrects nothing (mode "" or none).
func (c Correction) Off() bool { return c.Mode == "" || c.Mode == CorrectionNone }

// WithDefaults is c with mode "" made none and zero bounds replaced by the mode's defaults.
func (c Correction) WithDefaults() Correction {
	if c.Off() {
		return Correction{Mode: CorrectionNone, Low: c.Low, High: c.High}
	}
	low, high := DefaultCorrectionBounds(c.Mode)
	c.Low = cmp.Or(c.Low, low)
	c.High = cmp.Or(c.High, high)
	return c
}

// String is the canonical form of the correction after defaults, e.g. "mis[0.5,2]", "tis[2]",
// "none": a graph built with one correction differs from a graph built with another exactly when
// their strings differ, so it can key compiled executables.
func (c Correction) String() string {
	d := c.WithDefaults()
	switch d.Mode {
	case CorrectionNone:
		return CorrectionNone
	case CorrectionTIS:
		return fmt.Sprintf("tis[%g]", d.High)
	}
	return fmt.Sprintf("%s[%g,%g]", d.Mode, d.Low, d.High)
}

// Validate names the first bad field of the correction block ("correction.mode", ".low", ".high")
// and its allowed values.
func (c Correction) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("loss: policy config correction.%s=%v: %s", field, v, want)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if c.Mode != "" && !slices.Contains(CorrectionModes, c.Mode) {
		return bad("mode", fmt.Sprintf("%q", c.Mode), fmt.Sprintf("allowed %q (or unset)", CorrectionModes))
	}
	if !finite(c.Low) || c.Low < 0 {
		return bad("low", c.Low, "must be finite and ≥ 0 (0: the mode's default)")
	}
	if !finite(c.High) || c.High < 0 {
		return bad("high", c.High, "must be finite and ≥ 0 (0: the mode's default)")
	}
	d := c.WithDefaults()
	switch d.Mode {
	case CorrectionNone:
		if c.Low != 0 {
			return bad("low", c.Low, "mode none takes no bounds; must be 0")
		}
		if c.High != 0 {
			return bad("high", c.High, "mode none takes no bounds; must be 0")
		}
	case CorrectionTIS:
		if c.Low != 0 {
			return bad("low", c.Low, "mode tis truncates from above only (min(ρ, high)); must be 0 (a two-sided mask is mis or icepop)")
		}
		if d.High < 1 {
			return bad("high", c.High, "mode tis needs the truncation C ≥ 1 (0: default 2)")
		}
	default: // mis, geo_mask, icepop
		if d.Low > 1 {
			return bad("low", c.Low, fmt.Sprintf("mode %s needs 0 < low ≤ 1 (a ratio of 1, no mismatch, must be kept)", d.Mode))
		}
		if d.High < 1 {
			return bad("high", c.High, fmt.Sprintf("mode %s needs high ≥ 1 (a ratio of 1, no mismatch, must be kept)", d.Mode))
		}
	}
	return nil
}
