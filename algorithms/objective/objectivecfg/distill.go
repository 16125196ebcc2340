package objectivecfg

import (
	"fmt"
	"math"

	"github.com/temperml/temper/internal/config"
)

// Divergences of the distillation objective (loss.DistillForwardKL, DistillReverseKL, DistillJSD).
const (
	DivForward = "forward"
	DivReverse = "reverse"
	DivJSD     = "jsd"
)

// DistillConfig configures the distillation objective: a student's next-token distributions are
// pulled towards a teacher's at temperature τ, on the data's completions and, with Lambda > 0, on the
// student's own samples of the same prompts (GKD's on-policy mixture: Agarwal et al. 2024). Forward KL
// on fixed data is classic logit distillation (Hinton et al. 2015); reverse KL on the student's samples
// (Lambda 1) is mode-seeking on-policy distillation; jsd with β interpolates between the two (β = 0 is
// forward KL, β = 1 reverse KL, as in TRL's GKD trainer).
type DistillConfig struct {
	Divergence  string  `json:"divergence" default:"forward" help:"forward: KL(teacher‖student), mode-covering | reverse: KL(student‖teacher), mode-seeking | jsd: GKD's β-skewed Jensen–Shannon divergence"`
	Beta        float64 `json:"beta" default:"0.5" help:"jsd only: the skew β in [0, 1] (0 = forward KL, 1 = reverse KL)"`
	Temperature float64 `json:"temperature" default:"1" help:"τ > 0: both distributions are softmax(logits/τ); the loss is scaled by τ² (Hinton et al.)"`
	TopK        int     `json:"top_k" default:"0" help:"0: the teacher's full distribution; k > 0: its k most likely tokens per position, renormalised (forward only; what precomputed targets store)"`
	Lambda      float64 `json:"lambda" default:"0" help:"λ in [0, 1]: the fraction of each batch's rows replaced by the student's own samples of the same prompts (GKD's on-policy mixture; lambda 1 with divergence reverse: on-policy reverse-KL distillation)"`
	// The student's samples (Lambda > 0).
	SampleTokens      int     `json:"sample_tokens" default:"16" help:"longest completion the student samples for an on-policy row"`
	SampleTemperature float64 `json:"sample_temperature" default:"1" help:"sampling temperature of the student's on-policy rows (0: greedy)"`
}

// DefaultDistill returns the documented defaults: forward KL at τ = 1 on the data only.
func DefaultDistill() DistillConfig {
	return DistillConfig{Divergence: DivForward, Beta: 0.5, Temperature: 1, SampleTokens: 16, SampleTemperature: 1}
}

// OnPolicyRows is how many of a batch's rows are the student's samples: round(λ·rows).
func (c DistillConfig) OnPolicyRows(rows int) int {
	return int(math.Round(c.Lambda * float64(rows)))
}

// Validate names the bad field and its allowed values.
func (c DistillConfig) Validate() error {
	switch {
	case c.Divergence != DivForward && c.Divergence != DivReverse && c.Divergence != DivJSD:
		return &config.FieldError{Path: "divergence", Msg: fmt.Sprintf("%q: allowed values: %s, %s, %s", c.Divergence, DivForward, DivReverse, DivJSD)}
	case !(c.Beta >= 0 && c.Beta <= 1):
		return &config.FieldError{Path: "beta", Msg: fmt.Sprintf("%g: want 0 <= beta <= 1", c.Beta)}
	case !(c.Temperature > 0) || math.IsInf(c.Temperature, 0):
		return &config.FieldError{Path: "temperature", Msg: fmt.Sprintf("%g: want a finite value > 0", c.Temperature)}
	case c.TopK < 0:
		return &config.FieldError{Path: "top_k", Msg: fmt.Sprintf("%d: want 0 (full distribution) or k > 0", c.TopK)}
	case c.TopK > 0 && c.Divergence != DivForward:
		return &config.FieldError{Path: "top_k", Msg: fmt.Sprintf("%d: top-k teacher targets hold too little of the teacher for %s (only divergence forward reads them); set top_k 0", c.TopK, c.Divergence)}
	case !(c.Lambda >= 0 && c.Lambda <= 1):
		return &config.FieldError{Path: "lambda", Msg: fmt.Sprintf("%g: want 0 <= lambda <= 1", c.Lambda)}
	case c.Lambda > 0 && c.SampleTokens < 1:
		return &config.FieldError{Path: "sample_tokens", Msg: fmt.Sprintf("%d: want >= 1 when lambda > 0", c.SampleTokens)}
	case !(c.SampleTemperature >= 0) || math.IsInf(c.SampleTemperature, 0):
		return &config.FieldError{Path: "sample_temperature", Msg: fmt.Sprintf("%g: want a finite value >= 0", c.SampleTemperature)}
	}
	return nil
}

// Metric is the name of the divergence the objective reports (loss.Distill*'s metric).
func (c DistillConfig) Metric() string {
	switch {
	case c.TopK > 0:
		return "forward_kl_topk"
	case c.Divergence == DivReverse || (c.Divergence == DivJSD && c.Beta == 1):
		return "reverse_kl"
	case c.Divergence == DivJSD && c.Beta > 0:
		return "jsd"
	}
	return "forward_kl"
}
