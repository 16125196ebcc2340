package losscfg

import (
	"fmt"
	"math"
	"slices"
)

// Preference-loss kinds accepted by Preference.Kind.
const (
	PrefDPO   = "dpo"
	PrefIPO   = "ipo"
	PrefORPO  = "orpo"
	PrefSimPO = "simpo"
	PrefKTO   = "kto"
)

// PrefKinds lists the accepted Preference.Kind values.
var PrefKinds = []string{PrefDPO, PrefIPO, PrefORPO, PrefSimPO, PrefKTO}

// Preference configures one preference loss (DPO, IPO, ORPO, SimPO or KTO). Fields that the chosen
// kind does not read are ignored (and not validated), except label_smoothing, which only dpo and simpo
// accept so that a value meant for them is not silently dropped.
//
// β depends on the kind, so Beta = 0 means "the kind's default" (DefaultBeta, read through
// BetaOrDefault), and DefaultPreference leaves it 0: a config whose defaults are filled in before its
// kind is decoded (kind: simpo, no beta) still gets the right β.
type Preference struct {
	Kind string  `json:"kind" default:"dpo" help:"preference loss: dpo | ipo | orpo | simpo | kto"`
	Beta float64 `json:"beta" default:"0" help:"β > 0, scale of the implicit reward; 0 picks the kind's default: dpo 0.1, ipo 0.1, kto 0.1, simpo 2.0 (orpo has no β; see lambda)"`
	// LabelSmoothing is the assumed rate ε of flipped preference labels (conservative DPO, cDPO).
	LabelSmoothing float64 `json:"label_smoothing" default:"0" help:"dpo, simpo: assumed rate ε of flipped preference labels (conservative DPO), 0 ≤ ε < 0.5"`
	// AverageLogProbs makes IPO use length-averaged log-ratios, as TRL does; false is the paper's sums.
	AverageLogProbs bool `json:"average_log_probs" default:"true" help:"ipo: length-average the log-ratios as TRL does (false: the paper's per-sequence sums)"`
	// GammaBetaRatio sets SimPO's target reward margin γ = GammaBetaRatio·β, the parameterisation the
	// SimPO authors tune (β 2.0, γ/β 0.5 → γ 1.0).
	GammaBetaRatio float64 `json:"gamma_beta_ratio" default:"0.5" help:"simpo: target reward margin as a multiple of β (γ = ratio·β), ≥ 0"`
	Lambda         float64 `json:"lambda" default:"0.1" help:"orpo: weight λ > 0 of the odds-ratio term added to the chosen NLL"`
	// DesirableWeight and UndesirableWeight are KTO's λD and λU. The KTO paper advises choosing them so
	// that λD·n_D / (λU·n_U) ∈ [1, 4/3], n_D and n_U being the numbers of desirable and undesirable
	// examples; with balanced data the defaults (1, 1) satisfy it.
	DesirableWeight   float64 `json:"desirable_weight" default:"1" help:"kto: λD > 0, weight of desirable rows; the paper advises λD·n_D/(λU·n_U) in [1, 4/3]"`
	UndesirableWeight float64 `json:"undesirable_weight" default:"1" help:"kto: λU > 0, weight of undesirable rows"`
	// SFTCoef α adds α × the token-mean negative log-likelihood of the chosen (KTO: desirable)
	// completions to the loss: the NLL term of RPO (Pang et al. 2024, "Iterative Reasoning Preference
	// Optimization"; TRL's rpo_alpha). DPO-style losses only see the margin between chosen and
	// rejected, so both log-probs can fall together (the margin grows while the chosen answer becomes
	// unlikely, the collapse seen on small models); the NLL term holds the chosen log-prob up. ORPO has
	// this term built in and rejects a second one.
	SFTCoef float64 `json:"sft_coef" default:"0" help:"dpo, ipo, simpo, kto: α ≥ 0, add α × NLL of the chosen (desirable) completions (RPO); keeps log-probs from collapsing"`
}

// DefaultBeta is β when Preference.Beta is 0: 0.1 for dpo, ipo and kto (the papers' and TRL's
// default), 2.0 for simpo (the SimPO authors' recommended setting), 0 for orpo (which has no β) and for
// unknown kinds.
func DefaultBeta(kind string) float64 {
	switch kind {
	case PrefDPO, PrefIPO, PrefKTO:
		return 0.1
	case PrefSimPO:
		return 2.0
	}
	return 0
}

// DefaultPreference returns the documented defaults for kind: β = 0 (so DefaultBeta(kind)), ε = 0,
// IPO on averaged log-ratios, SimPO γ/β = 0.5, ORPO λ = 0.1, KTO λD = λU = 1. They match the struct's
// default tags.
func DefaultPreference(kind string) Preference {
	return Preference{
		Kind: kind, AverageLogProbs: true, GammaBetaRatio: 0.5, Lambda: 0.1,
		DesirableWeight: 1, UndesirableWeight: 1,
	}
}

// BetaOrDefault is Beta, or DefaultBeta(Kind) when Beta is 0.
func (c Preference) BetaOrDefault() float64 {
	if c.Beta == 0 {
		return DefaultBeta(c.Kind)
	}
	return c.Beta
}

// UsesReference reports whether the loss needs log-probs under a frozen reference model (dpo, ipo, kto).
func (c Preference) UsesReference() bool {
	return c.Kind == PrefDPO || c.Kind == PrefIPO || c.Kind == PrefKTO
}

// Paired reports whether the loss takes (chosen, rejected) pairs (PairLoss) rather than unpaired
// labelled examples (KTO, KTOLoss).
func (c Preference) Paired() bool { return c.Kind != PrefKTO }

// Validate names the first bad field with its allowed values.
func (c Preference) Validate() error {
	if !slices.Contains(PrefKinds, c.Kind) {
		return fmt.Errorf("loss: preference kind=%q: allowed %q", c.Kind, PrefKinds)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if c.Kind == PrefORPO {
		if c.Beta != 0 {
			return fmt.Errorf("loss: preference beta=%g: orpo has no β (its odds-ratio weight is lambda); leave beta 0", c.Beta)
		}
	} else if !finite(c.Beta) || c.Beta < 0 {
		return fmt.Errorf("loss: preference beta=%g: must be > 0 (0 picks the kind's default %g)", c.Beta, DefaultBeta(c.Kind))
	}
	if !(c.LabelSmoothing >= 0 && c.LabelSmoothing < 0.5) {
		return fmt.Errorf("loss: preference label_smoothing=%g: must be in [0, 0.5)", c.LabelSmoothing)
	}
	if !finite(c.SFTCoef) || c.SFTCoef < 0 {
		return fmt.Errorf("loss: preference sft_coef=%g: must be ≥ 0 and finite", c.SFTCoef)
	}
	if c.SFTCoef != 0 && c.Kind == PrefORPO {
		return fmt.Errorf("loss: preference sft_coef=%g: orpo already adds the chosen NLL (weight 1); leave sft_coef 0", c.SFTCoef)
	}
	if c.LabelSmoothing != 0 && c.Kind != PrefDPO && c.Kind != PrefSimPO {
		return fmt.Errorf("loss: preference label_smoothing=%g: only dpo and simpo use it, kind is %s", c.LabelSmoothing, c.Kind)
	}
	switch c.Kind {
	case PrefSimPO:
		if !finite(c.GammaBetaRatio) || c.GammaBetaRatio < 0 {
			return fmt.Errorf("loss: preference gamma_beta_ratio=%g: must be ≥ 0 and finite", c.GammaBetaRatio)
		}
	case PrefORPO:
		if !finite(c.Lambda) || !(c.Lambda > 0) {
			return fmt.Errorf("loss: preference lambda=%g: must be > 0 and finite", c.Lambda)
		}
	case PrefKTO:
		if !finite(c.DesirableWeight) || !(c.DesirableWeight > 0) {
			return fmt.Errorf("loss: preference desirable_weight=%g: must be > 0 and finite", c.DesirableWeight)
		}
		if !finite(c.UndesirableWeight) || !(c.UndesirableWeight > 0) {
			return fmt.Errorf("loss: preference undesirable_weight=%g: must be > 0 and finite", c.UndesirableWeight)
		}
	}
	return nil
}
