package workflows

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/internal/config"
)

// ModelSpec picks the architecture of a phase that starts from scratch (no `from`).
type ModelSpec struct {
	Preset string        `json:"preset" default:"tiny" help:"tiny | small | base (or a real shape, not trainable here)"`
	Config *model.Config `json:"config,omitempty" help:"a full model config instead of a preset"`
}

// Resolve returns the model config.
func (m ModelSpec) Resolve() (model.Config, error) {
	if m.Config != nil {
		return *m.Config, m.Config.Validate()
	}
	c, err := model.Preset(m.Preset)
	if err != nil {
		return c, &config.FieldError{Path: "model.preset", Msg: err.Error()}
	}
	return c, nil
}

// EvalSpec says when and how a training phase evaluates.
type EvalSpec struct {
	EveryChunks  int     `json:"every_chunks" default:"0" help:"also evaluate every N chunks (0: only before and after)"`
	Before       bool    `json:"before" default:"true" help:"evaluate the starting checkpoint first (reported as *_before)"`
	Examples     int     `json:"examples" default:"200" help:"held-out examples used (0: all)"`
	MaxNewTokens int     `json:"max_new_tokens" default:"16" help:"tokens generated per held-out prompt"`
	PassK        int     `json:"pass_k" default:"1" help:"also report pass@k with k sampled completions when > 1"`
	Temperature  float64 `json:"temperature" default:"1" help:"sampling temperature for pass@k"`
}

// TrainConfig configures the "pretrain" and "sft" phase kinds.
type TrainConfig struct {
	Model            ModelSpec       `json:"model"`
	Data             train.DataSpec  `json:"data"`
	Batch            train.BatchSpec `json:"batch"`
	Steps            int             `json:"steps" default:"200" help:"optimizer steps in the phase"`
	ChunkSteps       int             `json:"chunk_steps" default:"50" help:"steps per trainer activity; a checkpoint is committed after each"`
	Optimizer        train.Optim     `json:"optimizer"`
	Eval             EvalSpec        `json:"eval"`
	MaxSeconds       float64         `json:"max_seconds" default:"0" help:"also stop after the chunk that reaches this much training wall time (0: no limit; steps still shapes the LR schedule)"`
	KeepLast         int             `json:"keep_last" default:"3" help:"checkpoints kept besides the best"`
	HeartbeatTimeout config.Duration `json:"heartbeat_timeout" default:"30s" help:"a trainer silent this long is presumed dead; its chunk is retried elsewhere"`
	LoRA             *model.LoRA     `json:"lora,omitempty" help:"train LoRA adapters on the frozen starting model instead of every weight; checkpoints hold the adapters and the base URI"`
}

func defaultTrainConfig(text bool) *TrainConfig {
	return &TrainConfig{
		Model:      ModelSpec{Preset: "tiny"},
		Data:       train.DataSpec{TrainExamples: 2000, HeldoutExamples: 200, Text: text},
		Batch:      train.BatchSpec{Rows: 16, Seq: 64},
		Steps:      200,
		ChunkSteps: 50,
		Optimizer:  train.Optim{LR: 3e-3, WarmupSteps: 20, MinLRRatio: 0.1, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1},
		Eval:       EvalSpec{Before: true, Examples: 200, MaxNewTokens: 16, PassK: 1, Temperature: 1},
		KeepLast:   3, HeartbeatTimeout: config.Duration(30 * time.Second),
	}
}

// Validate names the bad field and its allowed values.
func (c *TrainConfig) Validate() error {
	if _, err := c.Model.Resolve(); err != nil {
		return err
	}
	if err := c.Data.Validate(); err != nil {
		return err
	}
	if err := c.Optimizer.Validate(); err != nil {
		return err
	}
	if c.LoRA != nil {
		if err := c.LoRA.Validate(); err != nil {
			return &config.FieldError{Path: "lora", Msg: err.Error()}
		}
	}
	switch {
	case c.Batch.Rows < 1 || c.Batch.Rows > 4096:
		return &config.FieldError{Path: "batch.rows", Msg: fmt.Sprintf("%d: want 1..4096", c.Batch.Rows)}
	case c.Batch.Seq < 2 || c.Batch.Seq > 8192:
		return &config.FieldError{Path: "batch.seq", Msg: fmt.Sprintf("%d: want 2..8192", c.Batch.Seq)}
	case c.Steps < 1:
		return &config.FieldError{Path: "steps", Msg: "must be >= 1"}
	case !(c.MaxSeconds >= 0):
		return &config.FieldError{Path: "max_seconds", Msg: "must be >= 0"}
	case c.ChunkSteps < 1:
		return &config.FieldError{Path: "chunk_steps", Msg: "must be >= 1"}
	case c.KeepLast < 1:
		return &config.FieldError{Path: "keep_last", Msg: "must be >= 1"}
	case c.HeartbeatTimeout.D() < time.Second:
		return &config.FieldError{Path: "heartbeat_timeout", Msg: "want at least 1s"}
	case c.Eval.PassK < 1:
		return &config.FieldError{Path: "eval.pass_k", Msg: "must be >= 1"}
	}
	return nil
}

func init() {
	RegisterPhase(PhaseKind{Kind: "pretrain", WorkflowName: "Pretrain", Workflow: Train,
		Doc:       "language-model training on plain text (every token counts); data.text defaults to true",
		NewConfig: func() PhaseConfig { return defaultTrainConfig(true) }})
	RegisterPhase(PhaseKind{Kind: "sft", WorkflowName: "SFT", Workflow: Train,
		Doc:       "supervised fine-tuning on prompt/completion or chat data; only completion tokens count",
		NewConfig: func() PhaseConfig { return defaultTrainConfig(false) }})
}

// copyMetrics copies src into dst with a suffix on every name, in sorted key order (no map-order
// dependence in workflow code).
func copyMetrics(dst, src map[string]float64, suffix string) {
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dst[k+suffix] = src[k]
	}
}

// trainState is the Train loop's state; it travels in PhaseInput.Resume across continue-as-new.
type trainState struct {
	Step           int                `json:"step"`
	Chunks         int                `json:"chunks"`
	Checkpoint     string             `json:"checkpoint"`
	Cursor         train.Cursor       `json:"cursor"`
	FreshOptimizer bool               `json:"fresh_optimizer"`
	Before         map[string]float64 `json:"before,omitempty"`
	Last           map[string]float64 `json:"last,omitempty"`
	Best           string             `json:"best,omitempty"`
	BestScore      float64            `json:"best_score"`
	LossSum        float64            `json:"loss_sum"`
	LastLoss       float64            `json:"last_loss"`
	TokensPerS     float64            `json:"tokens_per_s"`
	NonFinite      int                `json:"non_finite"`
	Seconds        float64            `json:"seconds"` // training wall time (chunks only)
	Curve          []CurvePoint       `json:"curve,omitempty"`
}

// Train runs a pretrain or sft phase: chunks of steps on the trainer queue, evaluations before, every
// K chunks and at the end, the best checkpoint marked, old ones pruned. It returns the final checkpoint.
func Train(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	c, err := DecodePhaseConfig(in.Kind, in.Config, "config")
	if err != nil {
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	cfg := c.(*TrainConfig)
	seed := uint64(in.Seed)
	var st trainState
	if len(in.Resume) > 0 {
		if err := json.Unmarshal(in.Resume, &st); err != nil {
			return PhaseOutput{}, temporal.NewNonRetryableApplicationError("train: bad resume state", "InvalidInput", err)
		}
	}
	actx, shortCtx := trainerContexts(ctx, cfg.HeartbeatTimeout.D())
	evaluate := func(uri string) (map[string]float64, error) {
		var out train.EvalOutput
		err := workflow.ExecuteActivity(actx, train.EvaluateName, train.EvalInput{
			Store: in.Store, Checkpoint: uri, Data: cfg.Data, Examples: cfg.Eval.Examples, MaxNewTokens: cfg.Eval.MaxNewTokens,
			PassK: cfg.Eval.PassK, Temperature: cfg.Eval.Temperature, Seed: seed,
		}).Get(ctx, &out)
		return out.Metrics, err
	}
	if st.Checkpoint == "" {
		st.Cursor = train.Cursor{Seed: seed}
		if cfg.Data.Seed != 0 {
			st.Cursor.Seed = cfg.Data.Seed
		}
		if in.From == "" && cfg.LoRA != nil {
			err := &config.FieldError{Path: "lora", Msg: "LoRA trains adapters on a starting model: set from (or put a phase before this one)"}
			return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
		}
		if in.From == "" {
			mc, _ := cfg.Model.Resolve() // validated
			var out train.InitOutput
			if err := workflow.ExecuteActivity(shortCtx, train.InitName, train.InitInput{
				Store: in.Store, Run: in.RunID, Phase: in.Phase, Model: mc, Seed: seed,
			}).Get(ctx, &out); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: init: %w", in.Kind, in.Phase, err)
			}
			st.Checkpoint = out.Checkpoint
		} else {
			st.Checkpoint, st.FreshOptimizer = in.From, true
		}
		if cfg.Eval.Before {
			if st.Before, err = evaluate(st.Checkpoint); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: evaluate start: %w", in.Kind, in.Phase, err)
			}
			st.Curve = append(st.Curve, CurvePoint{Step: 0, ExactMatch: st.Before["heldout_exact_match"]})
		}
	}
	outOfTime := func() bool { return cfg.MaxSeconds > 0 && st.Seconds >= cfg.MaxSeconds }
	for st.Step < cfg.Steps && !outOfTime() {
		n := min(cfg.ChunkSteps, cfg.Steps-st.Step)
		chunkStart := workflow.Now(ctx)
		var out train.ChunkOutput
		if err := workflow.ExecuteActivity(actx, train.ChunkName, train.ChunkInput{
			Store: in.Store, Run: in.RunID, Phase: in.Phase, From: st.Checkpoint, Step: st.Step, Steps: n, TotalSteps: cfg.Steps,
			Cursor: st.Cursor, Data: cfg.Data, Batch: cfg.Batch, Optim: cfg.Optimizer, FreshOptimizer: st.FreshOptimizer,
			LoRA: cfg.LoRA,
		}).Get(ctx, &out); err != nil {
			return PhaseOutput{}, fmt.Errorf("%s %s: chunk at step %d: %w", in.Kind, in.Phase, st.Step, err)
		}
		st.Step, st.Checkpoint, st.Cursor, st.FreshOptimizer = out.Step, out.Checkpoint, out.Cursor, false
		st.Seconds += workflow.Now(ctx).Sub(chunkStart).Seconds()
		st.Chunks++
		st.LossSum += out.Loss * float64(n)
		st.LastLoss, st.TokensPerS, st.NonFinite = out.LastLoss, out.TokensPerS, st.NonFinite+out.NonFinite
		memo := map[string]any{"step": st.Step, "steps": cfg.Steps, "loss": out.Loss}
		last := st.Step >= cfg.Steps || outOfTime()
		if last || (cfg.Eval.EveryChunks > 0 && st.Chunks%cfg.Eval.EveryChunks == 0) {
			m, err := evaluate(st.Checkpoint)
			if err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: evaluate step %d: %w", in.Kind, in.Phase, st.Step, err)
			}
			st.Last = m
			st.Curve = append(st.Curve, CurvePoint{Seconds: st.Seconds, Step: st.Step, ExactMatch: m["heldout_exact_match"]})
			memo["heldout_exact_match"] = m["heldout_exact_match"]
			// Best by held-out exact match, ties broken by lower held-out loss.
			score := m["heldout_exact_match"] - 1e-6*m["heldout_loss"]
			if st.Best == "" || score > st.BestScore {
				st.Best, st.BestScore = st.Checkpoint, score
			}
		}
		if err := retainAndMemo(ctx, shortCtx, in, cfg.KeepLast, st.Best, memo); err != nil {
			return PhaseOutput{}, err
		}
		if !last && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return PhaseOutput{}, continueAsNew(ctx, in, st)
		}
	}
	metrics := map[string]float64{
		"steps": float64(st.Step), "loss": st.LossSum / float64(max(1, st.Step)), "last_loss": st.LastLoss,
		"tokens_per_s": st.TokensPerS, "non_finite_steps": float64(st.NonFinite), "train_seconds": st.Seconds,
	}
	copyMetrics(metrics, st.Last, "")
	copyMetrics(metrics, st.Before, "_before")
	return PhaseOutput{Checkpoint: st.Checkpoint, Metrics: metrics, Curve: st.Curve}, nil
}
