package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tools"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
)

// ModelSpec picks the architecture of a phase that starts from scratch (no `from`).
type ModelSpec struct {
	Preset string           `json:"preset" default:"tiny" help:"tiny | small | base (or a real shape, not trainable here)"`
	Config *modelcfg.Config `json:"config,omitempty" help:"a full model config instead of a preset"`
}

// Resolve returns the model config.
func (m ModelSpec) Resolve() (modelcfg.Config, error) {
	if m.Config != nil {
		return *m.Config, m.Config.Validate()
	}
	c, err := modelcfg.Preset(m.Preset)
	if err != nil {
		return c, &config.FieldError{Path: "model.preset", Msg: err.Error()}
	}
	return c, nil
}

// initFresh commits a seeded fresh model of spec (validated) as the phase's step 0 (trainapi.Init):
// the start of a kind whose model does not come from a checkpoint.
func (r *chunkedRun) initFresh(spec ModelSpec) (checkpoint string, fresh bool, err error) {
	mc, _ := spec.Resolve() // validated
	var out trainapi.InitOutput
	if err := r.exec(false, trainapi.InitName, trainapi.InitInput{Store: r.in.Store, Run: r.in.RunID, Phase: r.in.Phase, Model: mc, Seed: r.seed}, &out); err != nil {
		return "", false, fmt.Errorf("%s %s: init: %w", r.in.Kind, r.in.Phase, err)
	}
	return out.Checkpoint, false, nil
}

// EvalSpec says when and how a training phase evaluates.
type EvalSpec struct {
	EvalCadence
	Examples     int     `json:"examples" default:"200" help:"held-out examples used (0: all)"`
	MaxNewTokens int     `json:"max_new_tokens" default:"16" help:"tokens generated per held-out prompt"`
	PassK        int     `json:"pass_k" default:"1" help:"also report pass@k with k sampled completions when > 1"`
	Temperature  float64 `json:"temperature" default:"1" help:"sampling temperature for pass@k"`
	// Tools evaluates agentic episodes instead of single completions (the activity's EvalInput.Tools).
	Tools    []string `json:"tools,omitempty" help:"evaluate agentic episodes with these built-in tools (calc, check, python): each held-out prompt as the user's message, max_new_tokens per turn, exact match on the final answer; an RL phase with rollout.tools uses those when unset"`
	MaxTurns int      `json:"max_turns,omitempty" help:"with tools: policy turns per episode (0: 4; an RL phase: rollout.max_turns)"`
	// Verifiers score the greedy held-out completions for the record only: never a reward, never
	// a keep-best or back-tracking criterion (the "aesthetic" rule score beside a learned critic).
	Verifiers []verify.Component `json:"verifiers,omitempty" help:"score each greedy held-out completion with these verifiers (as in reward.verifiers; a critic's checkpoint may name an earlier phase): metrics heldout_score and heldout_score_LABEL, the completions kept under evals/ in the store; for the record only, never a reward"`
}

// validateVerifiers names a bad eval.verifiers.
func (e EvalSpec) validateVerifiers() error {
	if len(e.Verifiers) == 0 {
		return nil
	}
	if len(e.Tools) > 0 {
		return &config.FieldError{Path: "eval.verifiers", Msg: "score single completions: leave eval.tools empty"}
	}
	if err := rewardRegistry().Validate(verify.Spec{Verifiers: e.Verifiers}); err != nil {
		return &config.FieldError{Path: "eval.verifiers", Msg: err.Error()}
	}
	return nil
}

// validateTools names a bad eval.tools or eval.max_turns.
func (e EvalSpec) validateTools() error {
	if err := checkTools("eval.tools", e.Tools); err != nil {
		return err
	}
	if e.MaxTurns < 0 || e.MaxTurns > 64 {
		return &config.FieldError{Path: "eval.max_turns", Msg: fmt.Sprintf("%d: want 0 (default 4) to 64", e.MaxTurns)}
	}
	return nil
}

// firstError runs the checks in order and returns the first one's error (nil when all pass).
func firstError(checks ...func() error) error {
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkLookup names a lookup among tools when the data's task has no corpus for it to read.
func checkLookup(path string, names []string, data trainapi.DataSpec) error {
	i := slices.Index(names, "lookup")
	if i < 0 {
		return nil
	}
	if t, err := tasks.Lookup(data.Task); err == nil && data.Task != "" {
		if _, ok := t.(tasks.Corpus); ok {
			return nil
		}
	}
	return &config.FieldError{Path: fmt.Sprintf("%s[%d]", path, i), Msg: fmt.Sprintf("lookup reads the task's corpus: data.task %q has none (tasks with a corpus: facts)", data.Task)}
}

// checkTools names a tool that is not a built-in one.
func checkTools(path string, names []string) error {
	seen := map[string]bool{}
	for i, n := range names {
		if !slices.Contains(tools.Builtin, n) {
			return &config.FieldError{Path: fmt.Sprintf("%s[%d]", path, i), Msg: fmt.Sprintf("%q: allowed values: %s", n, strings.Join(tools.Builtin, ", "))}
		}
		if seen[n] {
			return &config.FieldError{Path: fmt.Sprintf("%s[%d]", path, i), Msg: fmt.Sprintf("%q listed twice", n)}
		}
		seen[n] = true
	}
	return nil
}

// TrainConfig configures the "pretrain" and "sft" phase kinds.
type TrainConfig struct {
	Model ModelSpec          `json:"model"`
	Data  trainapi.DataSpec  `json:"data"`
	Batch trainapi.BatchSpec `json:"batch"`
	ChunkSpec
	Eval EvalSpec       `json:"eval"`
	LoRA *modelcfg.LoRA `json:"lora,omitempty" help:"train LoRA adapters on the frozen starting model instead of every weight; checkpoints hold the adapters and the base URI"`
}

func defaultTrainConfig(text bool) *TrainConfig {
	return &TrainConfig{
		Model:     ModelSpec{Preset: "tiny"},
		Data:      trainapi.DataSpec{TrainExamples: 2000, HeldoutExamples: 200, Text: text},
		Batch:     trainapi.BatchSpec{Rows: 16, Seq: 64},
		ChunkSpec: defaultChunkSpec(200, 50, trainapi.Optim{LR: 3e-3, WarmupSteps: 20, MinLRRatio: 0.1, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}),
		Eval:      EvalSpec{EvalCadence: EvalCadence{Before: true}, Examples: 200, MaxNewTokens: 16, PassK: 1, Temperature: 1},
	}
}

// Validate names the bad field and its allowed values.
func (c *TrainConfig) Validate() error {
	if _, err := c.Model.Resolve(); err != nil {
		return err
	}
	if err := firstError(c.Data.Validate, c.Eval.validateTools, c.Eval.validateVerifiers,
		func() error { return checkLookup("eval.tools", c.Eval.Tools, c.Data) },
		c.ChunkSpec.Validate, c.Batch.Validate, c.Eval.EvalCadence.Validate); err != nil {
		return err
	}
	if c.LoRA != nil {
		if err := c.LoRA.Validate(); err != nil {
			return &config.FieldError{Path: "lora", Msg: err.Error()}
		}
	}
	switch {
	case c.Eval.PassK < 1:
		return &config.FieldError{Path: "eval.pass_k", Msg: "must be >= 1"}
	}
	return nil
}

func init() {
	RegisterPhase(PhaseKind{Kind: "pretrain", WorkflowName: "Pretrain", Workflow: Train,
		Doc:       "language-model training on plain text (every token counts); data.text defaults to true",
		NewConfig: func() PhaseConfig { return defaultTrainConfig(true) }})
	RegisterPhase(PhaseKind{Kind: "sft", WorkflowName: "SFT", Workflow: Train, TakesData: DataSFT,
		Doc:       "supervised fine-tuning on prompt/completion or chat data; only completion tokens count; from_data: a search phase's verified solutions",
		NewConfig: func() PhaseConfig { return defaultTrainConfig(false) }})
}

// copyMetrics copies src into dst with a suffix on every name, in sorted key order (no map-order
// dependence in workflow code).
func copyMetrics(dst, src map[string]float64, suffix string) {
	for _, k := range sortedKeys(src) {
		dst[k+suffix] = src[k]
	}
}

// sortedKeys lists m's keys in order (no map-order dependence in workflow code).
func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Train runs a pretrain or sft phase (runChunked): Init makes a seeded model when the phase has no
// `from`, Chunk trains next-token steps, Evaluate measures held-out exact match (the score; ties go
// to the lower held-out loss). It returns the final checkpoint.
func Train(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	cfg, err := decodeKindConfig[*TrainConfig](in)
	if err != nil {
		return PhaseOutput{}, err
	}
	if fd := in.FromData; fd != nil {
		// An earlier phase's data replaces the configured source; its held-out examples carry their
		// task, so exact match still uses the task's checker.
		cfg.Data.Task, cfg.Data.Train, cfg.Data.Heldout = "", fd.SFT, fd.Heldout
	}
	if in.From == "" && cfg.LoRA != nil {
		err := &config.FieldError{Path: "lora", Msg: "LoRA trains adapters on a starting model: set from (or put a phase before this one)"}
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	return runChunked(ctx, in, chunkedKind{
		spec: cfg.ChunkSpec, cadence: cfg.Eval.EvalCadence, dataSeed: cfg.Data.Seed,
		start: func(r *chunkedRun) (string, bool, error) {
			if in.From != "" {
				return in.From, true, nil
			}
			return r.initFresh(cfg.Model)
		},
		chunk: func(r *chunkedRun, head trainapi.ChunkHead) (string, any) {
			return trainapi.ChunkName, trainapi.ChunkInput{ChunkHead: head, Data: cfg.Data, Batch: cfg.Batch, LoRA: cfg.LoRA}
		},
		evaluate: lmEvaluate(in, cfg.Data, cfg.Eval),
		headline: "heldout_exact_match",
		score:    lmScore,
		report: func(st *LoopState, metrics map[string]float64) {
			metrics["tokens_per_s"] = st.Train["tokens_per_s"]
		},
	})
}

// lmEvaluate is the evaluation of the kinds whose product is a causal LM (pretrain, sft, distill):
// Evaluate on the data's held-out examples, recorded in the phase's metrics log at the step.
func lmEvaluate(in PhaseInput, data trainapi.DataSpec, ev EvalSpec) func(r *chunkedRun, uri string) (map[string]float64, error) {
	return func(r *chunkedRun, uri string) (map[string]float64, error) {
		var out trainapi.EvalOutput
		err := r.exec(true, trainapi.EvaluateName, trainapi.EvalInput{
			Store: in.Store, Checkpoint: uri, Data: data, Examples: ev.Examples, MaxNewTokens: ev.MaxNewTokens,
			PassK: ev.PassK, Temperature: ev.Temperature, Seed: r.seed,
			Log:   &trainapi.LogAt{Run: in.RunID, Phase: in.Phase, Step: r.st.Step},
			Tools: ev.Tools, MaxTurns: ev.MaxTurns, Verifiers: resolveVerifierRefs(ev.Verifiers, in.Earlier),
		}, &out)
		return out.Metrics, err
	}
}

// lmScore picks a causal LM's best checkpoint: held-out exact match, ties to the lower held-out loss.
func lmScore(m map[string]float64) float64 { return m["heldout_exact_match"] - 1e-6*m["heldout_loss"] }
