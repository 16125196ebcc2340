package objectivecfg

import (
	"fmt"
	"math"

	"github.com/temperml/temper/internal/config"
)

// BTConfig configures the Bradley–Terry reward-model objective. Per pair, with r = the sequence
// reward of prompt+completion (SequenceRewards: the value head at the last real token, plus the
// generative term when the model has one):
//
//	ℓ = −log σ(r_c − r_r − m) + λ·(r_c + r_r)²
//
// m (Margin) asks the chosen reward to beat the rejected one by at least m (Llama 2's margin loss
// with a constant margin); λ (CenterCoef) is the reward-centering term of Eisenstein et al. 2023
// (TRL's center_rewards_coefficient, 0.01 there): it pins the mean reward of a pair near 0, which
// the pairwise loss alone leaves free (it is invariant to adding a constant), so that sigmoid(r)
// and thresholds on r mean the same thing from run to run. It does not change which completion is
// preferred.
//
// LMCoef c > 0 adds c·CE(chosen), the next-token cross-entropy of the chosen completion (prompt
// masked), to the batch loss: the text-generation regularizer of GRM (Yang et al. 2024, "Regularizing
// hidden states enables learning generalizable reward model for LLMs"). It keeps the trunk computing
// what the task needs (here: the digits of the sum), which the reward head then reads.
type BTConfig struct {
	Margin     float64 `json:"margin" default:"0" help:"m >= 0: the loss -log σ(r_c - r_r - m) asks the chosen reward to beat the rejected one by m"`
	CenterCoef float64 `json:"center_coef" default:"0.01" help:"λ >= 0 of the reward-centering term λ·(r_c + r_r)² (keeps rewards near 0; 0 disables)"`
	LMCoef     float64 `json:"lm_coef" default:"0" help:"c >= 0: add c × next-token cross-entropy of the chosen completion (GRM's text-generation regularizer; 0 disables)"`
}

// DefaultBT returns the documented defaults: no margin, λ = 0.01.
func DefaultBT() BTConfig { return BTConfig{CenterCoef: 0.01} }

// Validate names the bad field.
func (c BTConfig) Validate() error {
	switch {
	case !(c.Margin >= 0) || math.IsInf(c.Margin, 0):
		return &config.FieldError{Path: "margin", Msg: fmt.Sprintf("%g: want a finite value >= 0", c.Margin)}
	case !(c.CenterCoef >= 0) || math.IsInf(c.CenterCoef, 0):
		return &config.FieldError{Path: "center_coef", Msg: fmt.Sprintf("%g: want a finite value >= 0", c.CenterCoef)}
	case !(c.LMCoef >= 0) || math.IsInf(c.LMCoef, 0):
		return &config.FieldError{Path: "lm_coef", Msg: fmt.Sprintf("%g: want a finite value >= 0", c.LMCoef)}
	}
	return nil
}
