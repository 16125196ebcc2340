package sample

import (
	"fmt"
	"math"
	"slices"
)

// Controls are the sampling controls a phase configures for its rollouts and evaluations (beside
// its temperature and token budget), as configs and activity inputs carry them. The zero value is
// off: plain temperature sampling.
type Controls struct {
	TopP              float64  `json:"top_p,omitempty" default:"0" help:"nucleus sampling: keep the smallest set of tokens with probability mass ≥ top_p (0 or 1: off)"`
	TopK              int      `json:"top_k,omitempty" default:"0" help:"keep the top_k most likely tokens (0: off)"`
	MinP              float64  `json:"min_p,omitempty" default:"0" help:"keep tokens at least min_p times as likely as the most likely one, after temperature (0: off)"`
	RepetitionPenalty float64  `json:"repetition_penalty,omitempty" default:"0" help:"CTRL's penalty on every token already in the prompt or completion: > 1 discourages repeats (0 or 1: off)"`
	Stop              []string `json:"stop,omitempty" help:"stop strings: a completion ends once its text contains one (kept in it, like a stop token)"`
}

// Validate names the first bad control and its allowed values.
func (c Controls) Validate() error {
	switch {
	case c.TopP < 0 || c.TopP > 1 || math.IsNaN(c.TopP):
		return fmt.Errorf("sample: top_p=%g: must be in [0, 1] (0 or 1 = off)", c.TopP)
	case c.TopK < 0:
		return fmt.Errorf("sample: top_k=%d: must be >= 0 (0 = off)", c.TopK)
	case c.MinP < 0 || c.MinP > 1 || math.IsNaN(c.MinP):
		return fmt.Errorf("sample: min_p=%g: must be in [0, 1] (0 = off)", c.MinP)
	case c.RepetitionPenalty < 0 || math.IsNaN(c.RepetitionPenalty) || math.IsInf(c.RepetitionPenalty, 0):
		return fmt.Errorf("sample: repetition_penalty=%g: must be > 0 (0 or 1 = off; > 1 discourages repeats)", c.RepetitionPenalty)
	case slices.Contains(c.Stop, ""):
		return fmt.Errorf("sample: stop=%q: an empty stop string", c.Stop)
	}
	return nil
}

// Off reports whether c changes nothing.
func (c Controls) Off() bool {
	return (c.TopP == 0 || c.TopP == 1) && c.TopK == 0 && c.MinP == 0 && (c.RepetitionPenalty == 0 || c.RepetitionPenalty == 1) && len(c.Stop) == 0
}

// Apply is o with c's controls, decode (the tokenizer's) reading the stop strings. A nil c is o.
func (c *Controls) Apply(o Options, decode func([]int) string) Options {
	if c == nil {
		return o
	}
	o.TopP, o.TopK, o.MinP, o.RepetitionPenalty = c.TopP, c.TopK, c.MinP, c.RepetitionPenalty
	if len(c.Stop) > 0 {
		o.StopStrings, o.Decode = slices.Clone(c.Stop), decode
	}
	return o
}

// OrNil is c, or nil when it is off: an activity input then carries nothing (and is what it was
// before sampling controls existed).
func (c Controls) OrNil() *Controls {
	if c.Off() {
		return nil
	}
	return &c
}
