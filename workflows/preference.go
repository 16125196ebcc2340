package workflows

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/internal/config"
)

// PrefEvalSpec says when and how a preference phase evaluates.
type PrefEvalSpec struct {
	EveryChunks  int  `json:"every_chunks" default:"0" help:"also evaluate every N chunks (0: only before and after)"`
	Before       bool `json:"before" default:"true" help:"evaluate the starting checkpoint first (reported as *_before)"`
	Examples     int  `json:"examples" default:"200" help:"held-out pairs (and exact-match prompts) used (0: all)"`
	ExactMatch   bool `json:"exact_match" default:"true" help:"with data.task, also measure greedy exact match with the task's checker (train.Evaluate)"`
	MaxNewTokens int  `json:"max_new_tokens" default:"16" help:"tokens generated per prompt for exact match"`
	KLTokens     int  `json:"kl_tokens" default:"16" help:"estimate KL(π‖πref) from one sampled completion of up to this many tokens per held-out prompt (0: off)"`
}

// PrefConfig configures the preference phase kinds (dpo, ipo, orpo, simpo, kto). The phase starts from
// `from` (an SFT checkpoint), which is also the reference model unless ref_checkpoint is set.
type PrefConfig struct {
	Loss          loss.Preference    `json:"loss" help:"the loss's hyperparameters; loss.kind is the phase kind"`
	Reference     string             `json:"reference" default:"precomputed" help:"precomputed: reference log-probs computed once (train.RefLogProbs) and stored with the data | on_the_fly: the reference model is held next to the policy during each chunk"`
	RefCheckpoint string             `json:"ref_checkpoint,omitempty" help:"reference model checkpoint URI; default: the phase's starting checkpoint"`
	Data          train.PrefDataSpec `json:"data"`
	Batch         train.BatchSpec    `json:"batch" help:"rows: pairs (kto: labelled completions) per step; seq: tokens per sequence (prompt + completion), fixed"`
	Steps         int                `json:"steps" default:"200" help:"optimizer steps in the phase"`
	ChunkSteps    int                `json:"chunk_steps" default:"50" help:"steps per trainer activity; a checkpoint is committed after each"`
	Optimizer     train.Optim        `json:"optimizer"`
	Eval          PrefEvalSpec       `json:"eval"`
	KeepLast      int                `json:"keep_last" default:"3" help:"checkpoints kept besides the best"`
	// HeartbeatTimeout bounds a trainer's silence before its activity is retried elsewhere.
	HeartbeatTimeout config.Duration `json:"heartbeat_timeout" default:"30s" help:"a trainer silent this long is presumed dead; its activity is retried elsewhere"`

	kind string // the phase kind, set by NewConfig: loss.kind must match it
}

func defaultPrefConfig(kind string) *PrefConfig {
	return &PrefConfig{
		Loss:       loss.DefaultPreference(kind),
		Reference:  train.RefPrecomputed,
		Data:       train.PrefDataSpec{TrainExamples: 2000, HeldoutExamples: 200},
		Batch:      train.BatchSpec{Rows: 16, Seq: 64},
		Steps:      200,
		ChunkSteps: 50,
		Optimizer:  train.Optim{LR: 1e-3, WarmupSteps: 10, MinLRRatio: 0.1, WeightDecay: 0, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1},
		Eval:       PrefEvalSpec{Before: true, Examples: 200, ExactMatch: true, MaxNewTokens: 16, KLTokens: 16},
		KeepLast:   3, HeartbeatTimeout: config.Duration(30 * time.Second),
		kind: kind,
	}
}

// Validate names the bad field and its allowed values.
func (c *PrefConfig) Validate() error {
	if c.kind != "" && c.Loss.Kind != c.kind {
		return &config.FieldError{Path: "loss.kind", Msg: fmt.Sprintf("%q: a %s phase trains %s (leave loss.kind unset)", c.Loss.Kind, c.kind, c.kind)}
	}
	if err := c.Loss.Validate(); err != nil {
		return &config.FieldError{Path: "loss", Msg: err.Error()}
	}
	if c.Reference != train.RefPrecomputed && c.Reference != train.RefOnTheFly {
		return &config.FieldError{Path: "reference", Msg: fmt.Sprintf("%q: allowed values: %s, %s", c.Reference, train.RefPrecomputed, train.RefOnTheFly)}
	}
	if err := c.Data.Validate(); err != nil {
		return err
	}
	if err := c.Optimizer.Validate(); err != nil {
		return err
	}
	switch {
	case c.Batch.Rows < 1 || c.Batch.Rows > 4096:
		return &config.FieldError{Path: "batch.rows", Msg: fmt.Sprintf("%d: want 1..4096", c.Batch.Rows)}
	case c.Batch.Seq < 2 || c.Batch.Seq > 8192:
		return &config.FieldError{Path: "batch.seq", Msg: fmt.Sprintf("%d: want 2..8192", c.Batch.Seq)}
	case c.Steps < 1:
		return &config.FieldError{Path: "steps", Msg: "must be >= 1"}
	case c.ChunkSteps < 1:
		return &config.FieldError{Path: "chunk_steps", Msg: "must be >= 1"}
	case c.KeepLast < 1:
		return &config.FieldError{Path: "keep_last", Msg: "must be >= 1"}
	case c.Eval.Examples < 0 || c.Eval.EveryChunks < 0 || c.Eval.KLTokens < 0:
		return &config.FieldError{Path: "eval", Msg: "examples, every_chunks and kl_tokens must be >= 0"}
	case c.Eval.MaxNewTokens < 1:
		return &config.FieldError{Path: "eval.max_new_tokens", Msg: "must be >= 1"}
	case c.HeartbeatTimeout.D() < time.Second:
		return &config.FieldError{Path: "heartbeat_timeout", Msg: "want at least 1s"}
	}
	return nil
}

// PrefKinds are the preference phase kinds, one per loss; each registers the workflow "Pref-<kind>".
var PrefKinds = []string{loss.PrefDPO, loss.PrefIPO, loss.PrefORPO, loss.PrefSimPO, loss.PrefKTO}

var prefDocs = map[string]string{
	loss.PrefDPO:   "Direct Preference Optimization on (prompt, chosen, rejected) pairs against a frozen reference",
	loss.PrefIPO:   "Identity Preference Optimisation (squared-loss DPO that does not overfit deterministic preferences)",
	loss.PrefORPO:  "ORPO: SFT on the chosen answers plus an odds-ratio penalty; no reference model",
	loss.PrefSimPO: "SimPO: length-normalised implicit reward with a target margin; no reference model",
	loss.PrefKTO:   "Kahneman–Tversky Optimization on completions labelled desirable/undesirable (pairs are split)",
}

func init() {
	for _, kind := range PrefKinds {
		kind := kind
		RegisterPhase(PhaseKind{Kind: kind, WorkflowName: "Pref-" + kind, Workflow: Preference,
			Doc:       prefDocs[kind] + "; starts from `from` (an SFT checkpoint), also the reference by default",
			NewConfig: func() PhaseConfig { return defaultPrefConfig(kind) }})
	}
}

// prefState is the Preference loop's state; it travels in PhaseInput.Resume across continue-as-new.
type prefState struct {
	Step           int                `json:"step"`
	Chunks         int                `json:"chunks"`
	Checkpoint     string             `json:"checkpoint"`
	Cursor         train.Cursor       `json:"cursor"`
	FreshOptimizer bool               `json:"fresh_optimizer"`
	Reference      string             `json:"reference"`
	Train          string             `json:"train,omitempty"`    // pairs made from the model's samples
	Heldout        string             `json:"heldout,omitempty"`  // held-out pairs made from the model's samples
	RefData        string             `json:"ref_data,omitempty"` // precomputed reference object
	DataStats      map[string]float64 `json:"data_stats,omitempty"`
	Before         map[string]float64 `json:"before,omitempty"`
	Last           map[string]float64 `json:"last,omitempty"`
	TrainMetrics   map[string]float64 `json:"train_metrics,omitempty"`
	Best           string             `json:"best,omitempty"`
	BestScore      float64            `json:"best_score"`
	LossSum        float64            `json:"loss_sum"`
	LastLoss       float64            `json:"last_loss"`
	NonFinite      int                `json:"non_finite"`
}

// Preference runs a dpo, ipo, orpo, simpo or kto phase: optionally pairs made from the starting model's
// verified samples, the reference log-probs precomputed once (unless on the fly or reference-free),
// chunks of steps on the trainer queue, held-out preference metrics and exact match before, every K
// chunks and at the end, the best checkpoint (by held-out preference accuracy) marked, old ones pruned,
// continue-as-new when the history grows. It returns the final checkpoint.
func Preference(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	c, err := DecodePhaseConfig(in.Kind, in.Config, "config")
	if err != nil {
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	cfg := c.(*PrefConfig)
	if in.From == "" {
		err := fmt.Errorf("%s phase %s needs a starting checkpoint: put it after an sft phase or set from (it is also the reference model)", in.Kind, in.Phase)
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	seed := uint64(in.Seed)
	var st prefState
	if len(in.Resume) > 0 {
		if err := json.Unmarshal(in.Resume, &st); err != nil {
			return PhaseOutput{}, temporal.NewNonRetryableApplicationError("preference: bad resume state", "InvalidInput", err)
		}
	}
	actx, shortCtx := trainerContexts(ctx, cfg.HeartbeatTimeout.D())
	data := func() train.PrefDataSpec {
		d := cfg.Data
		if st.Train != "" {
			d.Train, d.FromModel = st.Train, nil
		}
		if st.Heldout != "" {
			d.Heldout = st.Heldout
		}
		return d
	}
	evaluate := func(uri string) (map[string]float64, error) {
		var out train.EvalOutput
		if err := workflow.ExecuteActivity(actx, train.PrefEvaluateName, train.PrefEvalInput{
			Store: in.Store, Checkpoint: uri, Reference: st.Reference, Data: data(), Loss: cfg.Loss,
			Examples: cfg.Eval.Examples, KLTokens: cfg.Eval.KLTokens, Seed: seed,
		}).Get(ctx, &out); err != nil {
			return nil, err
		}
		m := out.Metrics
		if spec, ok := cfg.Data.TaskSpec(); ok && cfg.Eval.ExactMatch {
			var em train.EvalOutput
			if err := workflow.ExecuteActivity(actx, train.EvaluateName, train.EvalInput{
				Store: in.Store, Checkpoint: uri, Data: spec, Examples: cfg.Eval.Examples, MaxNewTokens: cfg.Eval.MaxNewTokens,
				PassK: 1, Seed: seed,
			}).Get(ctx, &em); err != nil {
				return nil, err
			}
			copyMetrics(m, em.Metrics, "")
		}
		return m, nil
	}
	if st.Checkpoint == "" {
		st.Cursor = train.Cursor{Seed: seed}
		if cfg.Data.Seed != 0 {
			st.Cursor.Seed = cfg.Data.Seed
		}
		st.Reference = cfg.RefCheckpoint
		if st.Reference == "" {
			st.Reference = in.From
		}
		if s := cfg.Data.FromModel; s != nil {
			samp := s.WithDefaults()
			samp.SyntheticHeldout = samp.SyntheticHeldout || cfg.Data.Heldout != "" // the user's held-out set wins
			var out train.PrefFromModelOutput
			if err := workflow.ExecuteActivity(actx, train.PreferencesFromModelName, train.PrefFromModelInput{
				Store: in.Store, Run: in.RunID, Phase: in.Phase, Checkpoint: in.From, Data: cfg.Data, Sampling: samp, Seed: seed,
			}).Get(ctx, &out); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: preferences from model: %w", in.Kind, in.Phase, err)
			}
			st.Train, st.Heldout = out.Train, out.Heldout
			st.DataStats = map[string]float64{"data_pairs": float64(out.Pairs), "data_prompts": float64(out.Prompts),
				"data_all_correct": float64(out.AllCorrect), "data_none_correct": float64(out.NoneCorrect), "data_sample_rate": out.SampleRate,
				"data_heldout_pairs": float64(out.HeldoutPairs)}
		}
		if cfg.Reference == train.RefPrecomputed && cfg.Loss.UsesReference() {
			var out train.RefLogProbsOutput
			if err := workflow.ExecuteActivity(actx, train.RefLogProbsName, train.RefLogProbsInput{
				Store: in.Store, Run: in.RunID, Phase: in.Phase, Reference: st.Reference, Data: data(), Kind: cfg.Loss.Kind,
				Seq: cfg.Batch.Seq, Seed: seed,
			}).Get(ctx, &out); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: reference log-probs: %w", in.Kind, in.Phase, err)
			}
			st.RefData = out.RefData
		}
		if cfg.Eval.Before {
			if st.Before, err = evaluate(in.From); err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: evaluate start: %w", in.Kind, in.Phase, err)
			}
		}
		st.Checkpoint, st.FreshOptimizer = in.From, true
	}
	for st.Step < cfg.Steps {
		n := min(cfg.ChunkSteps, cfg.Steps-st.Step)
		var out train.PrefChunkOutput
		if err := workflow.ExecuteActivity(actx, train.PrefChunkName, train.PrefChunkInput{
			Store: in.Store, Run: in.RunID, Phase: in.Phase, From: st.Checkpoint, Step: st.Step, Steps: n, TotalSteps: cfg.Steps,
			Cursor: st.Cursor, Data: data(), RefData: st.RefData, Reference: st.Reference, Batch: cfg.Batch, Optim: cfg.Optimizer,
			Loss: cfg.Loss, FreshOptimizer: st.FreshOptimizer,
		}).Get(ctx, &out); err != nil {
			return PhaseOutput{}, fmt.Errorf("%s %s: chunk at step %d: %w", in.Kind, in.Phase, st.Step, err)
		}
		st.Step, st.Checkpoint, st.Cursor, st.FreshOptimizer = out.Step, out.Checkpoint, out.Cursor, false
		st.Chunks++
		st.LossSum += out.Loss * float64(n)
		st.LastLoss, st.NonFinite, st.TrainMetrics = out.LastLoss, st.NonFinite+out.NonFinite, out.Metrics
		memo := map[string]any{"step": st.Step, "steps": cfg.Steps, "loss": out.Loss}
		last := st.Step >= cfg.Steps
		if last || (cfg.Eval.EveryChunks > 0 && st.Chunks%cfg.Eval.EveryChunks == 0) {
			m, err := evaluate(st.Checkpoint)
			if err != nil {
				return PhaseOutput{}, fmt.Errorf("%s %s: evaluate step %d: %w", in.Kind, in.Phase, st.Step, err)
			}
			st.Last = m
			memo["heldout_pref_accuracy"] = m["heldout_pref_accuracy"]
			// Best by held-out preference accuracy, ties broken by exact match.
			score := m["heldout_pref_accuracy"] + 1e-3*m["heldout_exact_match"]
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
		"non_finite_steps": float64(st.NonFinite),
	}
	for _, k := range sortedKeys(st.TrainMetrics) {
		metrics["train_"+k] = st.TrainMetrics[k]
	}
	copyMetrics(metrics, st.DataStats, "")
	copyMetrics(metrics, st.Last, "")
	copyMetrics(metrics, st.Before, "_before")
	return PhaseOutput{Checkpoint: st.Checkpoint, Metrics: metrics}, nil
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
