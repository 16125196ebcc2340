package search

import (
	"fmt"
	"math"

	"github.com/temperml/temper/internal/config"
)

// Strategies and step kinds.
const (
	StrategyMCTS   = "mcts"
	StrategySample = "sample"
	StepLine       = "line"
	StepTokens     = "tokens"
	ValueRollout   = "rollout"
	ValuePRM       = "prm"
)

// Params configure a search; they sit in the search phase's config under "search".
type Params struct {
	Strategy     string  `json:"strategy" default:"mcts" help:"mcts: tree search over steps | sample: best-of-N rejection sampling of whole completions (the peer)"`
	Step         string  `json:"step" default:"line" help:"line: a step is one scratchpad line (at most step_tokens tokens) | tokens: a step is step_tokens tokens"`
	StepTokens   int     `json:"step_tokens" default:"16" help:"longest step in tokens; a line that does not end within it is a dead end"`
	MaxSteps     int     `json:"max_steps" default:"8" help:"deepest path: a step at this depth ends the solution"`
	MaxNewTokens int     `json:"max_new_tokens" default:"64" help:"longest whole completion (the path and its rollout)"`
	Expand       int     `json:"expand" default:"4" help:"K: candidate steps sampled per expansion (sample: completions per simulation)"`
	Simulations  int     `json:"simulations" default:"16" help:"simulations per prompt at most"`
	BudgetTokens int     `json:"budget_tokens" default:"0" help:"also stop a prompt's search once it has spent this many forward tokens (prompt, path and generated tokens of every request; 0: no limit)"`
	CPUCT        float64 `json:"c_puct" default:"1.5" help:"exploration weight of PUCT"`
	Temperature  float64 `json:"temperature" default:"1" help:"sampling temperature of expansions and rollouts"`
	StepCheck    bool    `json:"step_check" default:"true" help:"with a task that checks single lines (expr), a step its verifier rejects is a dead end at once: value 0, no rollout spent on it"`
	Value        string  `json:"value,omitempty" default:"rollout" help:"how mcts values a new step: rollout (the verifier's score of one rollout to the end) | prm (a process reward model's score of the step: one forward pass over the path, no generation; the phase's prm names the model)"`
	Margin       float64 `json:"margin" default:"0.25" help:"sibling steps whose mean values differ by more than this make a preference pair"`
	MaxPairs     int     `json:"max_pairs" default:"4" help:"preference pairs kept per prompt at most (largest value gaps first)"`
}

// DefaultParams are the documented defaults.
func DefaultParams() Params {
	return Params{Strategy: StrategyMCTS, Step: StepLine, StepTokens: 16, MaxSteps: 8, MaxNewTokens: 64, Expand: 4,
		Simulations: 16, CPUCT: 1.5, Temperature: 1, StepCheck: true, Value: ValueRollout, Margin: 0.25, MaxPairs: 4}
}

// Validate names the bad field (relative to the params) and its allowed values.
func (p Params) Validate() error {
	bad := func(field, msg string) error { return &config.FieldError{Path: field, Msg: msg} }
	switch {
	case p.Strategy != StrategyMCTS && p.Strategy != StrategySample:
		return bad("strategy", fmt.Sprintf("%q: allowed values: %s, %s", p.Strategy, StrategyMCTS, StrategySample))
	case p.Step != StepLine && p.Step != StepTokens:
		return bad("step", fmt.Sprintf("%q: allowed values: %s, %s", p.Step, StepLine, StepTokens))
	case p.StepTokens < 1 || p.StepTokens > 4096:
		return bad("step_tokens", fmt.Sprintf("%d: want 1..4096", p.StepTokens))
	case p.MaxSteps < 1 || p.MaxSteps > 256:
		return bad("max_steps", fmt.Sprintf("%d: want 1..256", p.MaxSteps))
	case p.MaxNewTokens < 1 || p.MaxNewTokens > 8192:
		return bad("max_new_tokens", fmt.Sprintf("%d: want 1..8192", p.MaxNewTokens))
	case p.Expand < 1 || p.Expand > 64:
		return bad("expand", fmt.Sprintf("%d: want 1..64", p.Expand))
	case p.Simulations < 1 || p.Simulations > 100000:
		return bad("simulations", fmt.Sprintf("%d: want 1..100000", p.Simulations))
	case p.BudgetTokens < 0:
		return bad("budget_tokens", fmt.Sprintf("%d: want >= 0 (0: no limit)", p.BudgetTokens))
	case !(p.CPUCT >= 0) || math.IsInf(p.CPUCT, 0):
		return bad("c_puct", fmt.Sprintf("%g: want a finite value >= 0", p.CPUCT))
	case !(p.Temperature > 0) || math.IsInf(p.Temperature, 0):
		return bad("temperature", fmt.Sprintf("%g: want > 0 (search needs distinct samples)", p.Temperature))
	case !(p.Margin >= 0 && p.Margin < 1):
		return bad("margin", fmt.Sprintf("%g: want 0 <= margin < 1 (values are verifier scores in [0, 1])", p.Margin))
	case p.Value != "" && p.Value != ValueRollout && p.Value != ValuePRM: // "": inputs recorded before the field, rollout
		return bad("value", fmt.Sprintf("%q: allowed values: %s, %s", p.Value, ValueRollout, ValuePRM))
	case p.Value == ValuePRM && p.Strategy != StrategyMCTS:
		return bad("value", fmt.Sprintf("prm values the steps of a tree: it needs strategy %s", StrategyMCTS))
	case p.MaxPairs < 0:
		return bad("max_pairs", fmt.Sprintf("%d: want >= 0", p.MaxPairs))
	}
	return nil
}
