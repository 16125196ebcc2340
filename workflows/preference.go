package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/internal/config"
)

// PrefEvalSpec says when and how a preference phase evaluates.
type PrefEvalSpec struct {
	EvalCadence
	Examples     int  `json:"examples" default:"200" help:"held-out pairs (and exact-match prompts) used (0: all)"`
	ExactMatch   bool `json:"exact_match" default:"true" help:"with data.task, also measure greedy exact match with the task's checker (train.Evaluate)"`
	MaxNewTokens int  `json:"max_new_tokens" default:"16" help:"tokens generated per prompt for exact match"`
	KLTokens     int  `json:"kl_tokens" default:"16" help:"estimate KL(π‖πref) from one sampled completion of up to this many tokens per held-out prompt (0: off)"`
}

// PrefConfig configures the preference phase kinds (dpo, ipo, orpo, simpo, kto). The phase starts from
// `from` (an SFT checkpoint), which is also the reference model unless ref_checkpoint is set.
type PrefConfig struct {
	Loss          losscfg.Preference    `json:"loss" help:"the loss's hyperparameters; loss.kind is the phase kind"`
	Reference     string                `json:"reference" default:"precomputed" help:"precomputed: reference log-probs computed once (train.RefLogProbs) and stored with the data | on_the_fly: the reference model is held next to the policy during each chunk"`
	RefCheckpoint string                `json:"ref_checkpoint,omitempty" help:"reference model checkpoint URI; default: the phase's starting checkpoint"`
	Data          trainapi.PrefDataSpec `json:"data"`
	Batch         trainapi.BatchSpec    `json:"batch" help:"rows: pairs (kto: labelled completions) per step; seq: tokens per sequence (prompt + completion), fixed"`
	ChunkSpec
	Eval PrefEvalSpec `json:"eval"`

	kind string // the phase kind, set by NewConfig: loss.kind must match it
}

func defaultPrefConfig(kind string) *PrefConfig {
	return &PrefConfig{
		Loss:      losscfg.DefaultPreference(kind),
		Reference: trainapi.RefPrecomputed,
		Data:      trainapi.PrefDataSpec{TrainExamples: 2000, HeldoutExamples: 200},
		Batch:     trainapi.BatchSpec{Rows: 16, Seq: 64},
		ChunkSpec: defaultChunkSpec(200, 50, trainapi.Optim{LR: 1e-3, WarmupSteps: 10, MinLRRatio: 0.1, WeightDecay: 0, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}),
		Eval:      PrefEvalSpec{EvalCadence: EvalCadence{Before: true}, Examples: 200, ExactMatch: true, MaxNewTokens: 16, KLTokens: 16},
		kind:      kind,
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
	if c.Reference != trainapi.RefPrecomputed && c.Reference != trainapi.RefOnTheFly {
		return &config.FieldError{Path: "reference", Msg: fmt.Sprintf("%q: allowed values: %s, %s", c.Reference, trainapi.RefPrecomputed, trainapi.RefOnTheFly)}
	}
	if err := firstError(c.Data.Validate, c.ChunkSpec.Validate, c.Batch.Validate); err != nil {
		return err
	}
	switch {
	case c.Eval.Examples < 0 || c.Eval.EveryChunks < 0 || c.Eval.KLTokens < 0:
		return &config.FieldError{Path: "eval", Msg: "examples, every_chunks and kl_tokens must be >= 0"}
	case c.Eval.MaxNewTokens < 1:
		return &config.FieldError{Path: "eval.max_new_tokens", Msg: "must be >= 1"}
	}
	return nil
}

// PrefKinds are the preference phase kinds, one per loss; each registers the workflow "Pref-<kind>".
var PrefKinds = []string{losscfg.PrefDPO, losscfg.PrefIPO, losscfg.PrefORPO, losscfg.PrefSimPO, losscfg.PrefKTO}

var prefDocs = map[string]string{
	losscfg.PrefDPO:   "Direct Preference Optimization on (prompt, chosen, rejected) pairs against a frozen reference",
	losscfg.PrefIPO:   "Identity Preference Optimisation (squared-loss DPO that does not overfit deterministic preferences)",
	losscfg.PrefORPO:  "ORPO: SFT on the chosen answers plus an odds-ratio penalty; no reference model",
	losscfg.PrefSimPO: "SimPO: length-normalised implicit reward with a target margin; no reference model",
	losscfg.PrefKTO:   "Kahneman–Tversky Optimization on completions labelled desirable/undesirable (pairs are split)",
}

func init() {
	for _, kind := range PrefKinds {
		kind := kind
		RegisterPhase(PhaseKind{Kind: kind, WorkflowName: "Pref-" + kind, Workflow: Preference, TakesData: DataPairs,
			Doc:       prefDocs[kind] + "; starts from `from` (an SFT checkpoint), also the reference by default; from_data: a search phase's pairs",
			NewConfig: func() PhaseConfig { return defaultPrefConfig(kind) }})
	}
}

// Preference runs a dpo, ipo, orpo, simpo or kto phase (runChunked). Its start optionally makes
// pairs from the starting model's verified samples and precomputes the reference log-probs once
// (unless on the fly or reference-free); PrefChunk trains the loss; PrefEvaluate (and Evaluate's
// exact match with data.task) measures held-out preferences. The score is held-out preference
// accuracy, ties broken by exact match. It returns the final checkpoint.
func Preference(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	cfg, err := decodeKindConfig[*PrefConfig](in)
	if err != nil {
		return PhaseOutput{}, err
	}
	if in.From == "" {
		err := fmt.Errorf("%s phase %s needs a starting checkpoint: put it after an sft phase or set from (it is also the reference model)", in.Kind, in.Phase)
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	if fd := in.FromData; fd != nil {
		// An earlier phase's pairs are the training data; the task (if any) still supplies the
		// held-out pairs and the exact-match checker.
		cfg.Data.Train, cfg.Data.FromModel = fd.Pairs, nil
	}
	return runChunked(ctx, in, chunkedKind{
		spec: cfg.ChunkSpec, cadence: cfg.Eval.EvalCadence, dataSeed: cfg.Data.Seed,
		start: func(r *chunkedRun) (string, bool, error) { return prefStart(r, cfg) },
		chunk: func(r *chunkedRun, head trainapi.ChunkHead) (string, any) {
			s := r.st.Setup
			return trainapi.PrefChunkName, trainapi.PrefChunkInput{ChunkHead: head, Data: prefData(cfg, s), RefData: s.RefData, Reference: s.Reference,
				Batch: cfg.Batch, Loss: cfg.Loss}
		},
		evaluate: func(r *chunkedRun, uri string) (map[string]float64, error) { return prefEvaluate(r, cfg, uri) },
		headline: "heldout_pref_accuracy",
		score:    func(m map[string]float64) float64 { return m["heldout_pref_accuracy"] + 1e-3*m["heldout_exact_match"] },
		report: func(st *LoopState, metrics map[string]float64) {
			for _, k := range sortedKeys(st.Train) {
				metrics["train_"+k] = st.Train[k]
			}
		},
	})
}

// prefData is the configured data with what the phase made from the model in its place.
func prefData(cfg *PrefConfig, s PhaseSetup) trainapi.PrefDataSpec {
	d := cfg.Data
	if s.Train != "" {
		d.Train, d.FromModel = s.Train, nil
	}
	if s.Heldout != "" {
		d.Heldout = s.Heldout
	}
	return d
}

// prefStart sets the reference model, makes the pairs from the model's samples (data.from_model)
// and precomputes the reference log-probs (reference: precomputed); the phase starts from `from`.
func prefStart(r *chunkedRun, cfg *PrefConfig) (string, bool, error) {
	in, s := r.in, &r.st.Setup
	s.Reference = cfg.RefCheckpoint
	if s.Reference == "" {
		s.Reference = in.From
	}
	if fm := cfg.Data.FromModel; fm != nil {
		samp := fm.WithDefaults()
		samp.SyntheticHeldout = samp.SyntheticHeldout || cfg.Data.Heldout != "" // the user's held-out set wins
		var out trainapi.PrefFromModelOutput
		if err := r.exec(true, trainapi.PreferencesFromModelName, trainapi.PrefFromModelInput{
			Store: in.Store, Run: in.RunID, Phase: in.Phase, Checkpoint: in.From, Data: cfg.Data, Sampling: samp, Seed: r.seed,
		}, &out); err != nil {
			return "", false, fmt.Errorf("%s %s: preferences from model: %w", in.Kind, in.Phase, err)
		}
		s.Train, s.Heldout = out.Train, out.Heldout
		s.Metrics = map[string]float64{"data_pairs": float64(out.Pairs), "data_prompts": float64(out.Prompts),
			"data_all_correct": float64(out.AllCorrect), "data_none_correct": float64(out.NoneCorrect), "data_sample_rate": out.SampleRate,
			"data_heldout_pairs": float64(out.HeldoutPairs)}
	}
	if cfg.Reference == trainapi.RefPrecomputed && cfg.Loss.UsesReference() {
		var out trainapi.RefLogProbsOutput
		if err := r.exec(true, trainapi.RefLogProbsName, trainapi.RefLogProbsInput{
			Store: in.Store, Run: in.RunID, Phase: in.Phase, Reference: s.Reference, Data: prefData(cfg, *s), Kind: cfg.Loss.Kind,
			Seq: cfg.Batch.Seq, Seed: r.seed,
		}, &out); err != nil {
			return "", false, fmt.Errorf("%s %s: reference log-probs: %w", in.Kind, in.Phase, err)
		}
		s.RefData = out.RefData
	}
	return in.From, true, nil
}

// prefEvaluate measures preference accuracy on held-out pairs and, with a task and eval.exact_match,
// greedy exact match.
func prefEvaluate(r *chunkedRun, cfg *PrefConfig, uri string) (map[string]float64, error) {
	in := r.in
	var out trainapi.EvalOutput
	if err := r.exec(true, trainapi.PrefEvaluateName, trainapi.PrefEvalInput{
		Store: in.Store, Checkpoint: uri, Reference: r.st.Setup.Reference, Data: prefData(cfg, r.st.Setup), Loss: cfg.Loss,
		Examples: cfg.Eval.Examples, KLTokens: cfg.Eval.KLTokens, Seed: r.seed,
	}, &out); err != nil {
		return nil, err
	}
	m := out.Metrics
	if spec, ok := cfg.Data.TaskSpec(); ok && cfg.Eval.ExactMatch {
		var em trainapi.EvalOutput
		if err := r.exec(true, trainapi.EvaluateName, trainapi.EvalInput{
			Store: in.Store, Checkpoint: uri, Data: spec, Examples: cfg.Eval.Examples, MaxNewTokens: cfg.Eval.MaxNewTokens,
			PassK: 1, Seed: r.seed,
		}, &em); err != nil {
			return nil, err
		}
		copyMetrics(m, em.Metrics, "")
	}
	return m, nil
}
