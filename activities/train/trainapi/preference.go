package trainapi

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/internal/config"
)

// Activity names of the preference phases (queue "trainer").
const (
	PrefChunkName            = "train.PrefChunk"
	PrefEvaluateName         = "train.PrefEvaluate"
	RefLogProbsName          = "train.RefLogProbs"
	PreferencesFromModelName = "train.PreferencesFromModel"
)

// PrefDataSpec says where preference examples come from: synthetic pairs of a built-in task (the
// correct answer chosen, a plausible mistake rejected; tasks.PrefSplit), or preference JSONL files in the
// store (tasks.PrefExample: pairs {prompt, chosen, rejected}, or for kto also {prompt, completion,
// label}). With both task and train set, train is the training data and the task supplies the held-out
// pairs (and the exact-match evaluation).
type PrefDataSpec struct {
	Task            string `json:"task,omitempty" help:"built-in task (temper data tasks): synthetic pairs, the correct answer chosen and a plausible mistake rejected, generated from the seed"`
	TrainExamples   int    `json:"train_examples,omitempty" default:"2000" help:"training pairs drawn from the task (kto: each pair gives one desirable and one undesirable example)"`
	HeldoutExamples int    `json:"heldout_examples,omitempty" default:"200" help:"held-out pairs; their prompts are those an sft phase with the same seed and sizes held out"`
	Train           string `json:"train,omitempty" help:"preference JSONL URI (file:///... or gs://...): {prompt, chosen, rejected} lines, or for kto also {prompt, completion, label}"`
	Heldout         string `json:"heldout,omitempty" help:"held-out preference JSONL URI (default with a task: the task's held-out pairs)"`
	Seed            uint64 `json:"seed,omitempty" help:"data seed; 0 uses the pipeline seed"`
	// FromModel, when set, makes the training pairs from samples of the phase's starting model (see
	// PreferencesFromModel); the workflow resolves it into Train before training.
	FromModel *PrefSampling `json:"from_model,omitempty" help:"build the training pairs from verified samples of the starting model instead of synthetic mistakes (needs task)"`
}

// PrefSampling configures preference pairs made from a model's verified samples.
type PrefSampling struct {
	Prompts      int     `json:"prompts" default:"1000" help:"training prompts sampled (from the task's training split)"`
	Samples      int     `json:"samples" default:"8" help:"completions sampled per prompt"`
	Temperature  float64 `json:"temperature" default:"1" help:"sampling temperature"`
	MaxNewTokens int     `json:"max_new_tokens" default:"16" help:"tokens generated per completion"`
	DropUnsolved bool    `json:"drop_unsolved" default:"false" help:"drop prompts none of whose samples is correct (default: pair the task's reference answer, as chosen, with a wrong sample)"`
	// SyntheticHeldout keeps the task's synthetic held-out pairs; by default the held-out pairs are made
	// like the training ones, from the model's samples on the held-out prompts.
	SyntheticHeldout bool `json:"synthetic_heldout" default:"false" help:"evaluate on the task's synthetic held-out pairs (default: pairs of the model's own samples on the held-out prompts; data.heldout, when set, wins)"`
}

// WithDefaults fills zero fields with the documented defaults.
func (p PrefSampling) WithDefaults() PrefSampling {
	p.Prompts = cmp.Or(p.Prompts, 1000)
	p.Samples = cmp.Or(p.Samples, 8)
	p.Temperature = cmp.Or(p.Temperature, 1)
	p.MaxNewTokens = cmp.Or(p.MaxNewTokens, 16)
	return p
}

// Validate names the bad field.
func (d PrefDataSpec) Validate() error {
	switch {
	case d.Task == "" && d.Train == "":
		return &config.FieldError{Path: "data", Msg: "set task (one of " + strings.Join(tasks.Names(), ", ") + ") or train (a preference JSONL URI)"}
	case d.FromModel != nil && d.Task == "":
		return &config.FieldError{Path: "data.from_model", Msg: "needs data.task (its prompts and checker)"}
	case d.FromModel != nil && d.Train != "":
		return &config.FieldError{Path: "data.from_model", Msg: "set from_model or train, not both"}
	}
	if d.Task != "" {
		t, err := tasks.Lookup(d.Task)
		if err != nil {
			return &config.FieldError{Path: "data.task", Msg: err.Error()}
		}
		if _, ok := t.(tasks.Mistaker); !ok && d.Train == "" && d.FromModel == nil {
			return &config.FieldError{Path: "data.task", Msg: d.Task + " has no synthetic preference pairs; set data.train or data.from_model"}
		}
		if d.TrainExamples <= 0 || d.HeldoutExamples < 0 {
			return &config.FieldError{Path: "data.train_examples", Msg: fmt.Sprintf("%d train / %d held-out: want > 0 and >= 0", d.TrainExamples, d.HeldoutExamples)}
		}
	}
	if err := checkDataURIs(d.Train, d.Heldout); err != nil {
		return err
	}
	if s := d.FromModel; s != nil {
		s2 := s.WithDefaults()
		switch {
		case s2.Prompts < 1:
			return &config.FieldError{Path: "data.from_model.prompts", Msg: "must be >= 1"}
		case s2.Samples < 2:
			return &config.FieldError{Path: "data.from_model.samples", Msg: "must be >= 2"}
		case !(s2.Temperature > 0):
			return &config.FieldError{Path: "data.from_model.temperature", Msg: "must be > 0"}
		case s2.MaxNewTokens < 1:
			return &config.FieldError{Path: "data.from_model.max_new_tokens", Msg: "must be >= 1"}
		}
	}
	return nil
}

// TaskSpec is the DataSpec of the task behind d (same seed and sizes, so the same held-out prompts), for
// train.Evaluate's exact match; ok is false without a task.
func (d PrefDataSpec) TaskSpec() (spec DataSpec, ok bool) {
	if d.Task == "" {
		return DataSpec{}, false
	}
	return DataSpec{Task: d.Task, TrainExamples: d.TrainExamples, HeldoutExamples: d.HeldoutExamples, Seed: d.Seed}, true
}

// Reference modes of a preference phase.
const (
	RefPrecomputed = "precomputed" // train.RefLogProbs once, stored with the data; training never holds πref
	RefOnTheFly    = "on_the_fly"  // a second engine holds πref during each chunk
)

// PrefChunkInput trains Steps steps of a preference objective from From and commits step Step+Steps.
type PrefChunkInput struct {
	ChunkHead
	Data PrefDataSpec `json:"data"`
	// RefData is the object RefLogProbs wrote (data with reference log-probs). When set, its rows are
	// the training data; when empty, the data comes from Data and, if the loss needs a reference,
	// Reference is loaded and scored on the fly.
	RefData   string             `json:"ref_data,omitempty"`
	Reference string             `json:"reference,omitempty"`
	Batch     BatchSpec          `json:"batch"` // rows: pairs (kto: labelled completions) per step; seq: tokens per sequence
	Loss      losscfg.Preference `json:"loss"`
}

// PrefEvalInput evaluates a checkpoint on held-out preference pairs.
type PrefEvalInput struct {
	Store      string `json:"store"`
	Checkpoint string `json:"checkpoint"`
	// Reference is the reference checkpoint of the implicit rewards (dpo, ipo, kto) and of the KL
	// estimates; empty skips what needs it.
	Reference string             `json:"reference,omitempty"`
	Data      PrefDataSpec       `json:"data"`
	Loss      losscfg.Preference `json:"loss"`
	// Examples caps the held-out pairs used (0: all).
	Examples int `json:"examples"`
	// KLTokens > 0 also estimates KL(πθ‖πref) from one completion of up to KLTokens tokens sampled
	// from the checkpoint for each held-out prompt.
	KLTokens int    `json:"kl_tokens"`
	Seed     uint64 `json:"seed"`
}

// PrefFromModelInput asks for preference pairs made from a checkpoint's verified samples.
type PrefFromModelInput struct {
	Store      string       `json:"store"`
	Run        string       `json:"run"`
	Phase      string       `json:"phase"`
	Checkpoint string       `json:"checkpoint"`
	Data       PrefDataSpec `json:"data"` // Task (prompts and checker), held-out size and seed
	Sampling   PrefSampling `json:"sampling"`
	Seed       uint64       `json:"seed"`
}

// PrefFromModelOutput names the pairs objects and says how the prompts fared.
type PrefFromModelOutput struct {
	Train   string `json:"train"`             // URI of the training pairs JSONL
	Heldout string `json:"heldout,omitempty"` // URI of the held-out pairs JSONL (unless SyntheticHeldout)
	// Stats of the training prompts.
	Pairs       int     `json:"pairs"`
	Prompts     int     `json:"prompts"`
	AllCorrect  int     `json:"all_correct"`  // prompts dropped: every sample correct
	NoneCorrect int     `json:"none_correct"` // prompts with no correct sample
	SampleRate  float64 `json:"sample_rate"`  // fraction of all samples that were correct
	// HeldoutPairs is the number of held-out pairs (held-out prompts with a wrong sample).
	HeldoutPairs int  `json:"heldout_pairs"`
	Resumed      bool `json:"resumed"`
}

// RefLogProbsInput asks for the reference log-probs of a preference phase's training data.
type RefLogProbsInput struct {
	Store     string       `json:"store"`
	Run       string       `json:"run"`
	Phase     string       `json:"phase"`
	Reference string       `json:"reference"` // reference checkpoint URI
	Data      PrefDataSpec `json:"data"`
	Kind      string       `json:"kind"` // loss kind: kto reads unpaired rows with mismatched KL completions
	Seq       int          `json:"seq"`  // longest sequence allowed (batch.seq)
	Seed      uint64       `json:"seed"`
}

// RefLogProbsOutput names the object that holds the data with its reference log-probs.
type RefLogProbsOutput struct {
	RefData  string `json:"ref_data"`
	Examples int    `json:"examples"`
	Resumed  bool   `json:"resumed"` // an earlier attempt had written it
}

// OnlineDPOStepName is online DPO's trainer activity (queue "trainer"): one RL iteration's policy
// step with a pairwise preference loss instead of a policy gradient.
const OnlineDPOStepName = "train.OnlineDPOStep"

// OnlineDPOStepInput trains policy version Version on one iteration's scored rollouts: each prompt's
// best sample against its worst (groups whose samples all score the same are skipped), with the
// pairwise loss Loss (dpo or ipo) against Reference, and commits version Version+1. Its output is
// a PolicyStepOutput, as the RL loop reads every step's.
type OnlineDPOStepInput struct {
	Store string `json:"store"`
	Run   string `json:"run"`
	// Phase names the checkpoint directory; a back-tracked branch uses its own ("odpo.b1").
	Phase     string        `json:"phase"`
	Policy    string        `json:"policy"`    // checkpoint of version Version
	Reference string        `json:"reference"` // the frozen reference of the implicit rewards
	Version   int           `json:"version"`
	Shards    []ScoredShard `json:"shards"` // the iteration's rollouts and verdicts, in prompt order
	// Loss is the pairwise loss; its β is already scaled by back-tracking's KL factor.
	Loss           losscfg.Preference `json:"loss"`
	Optim          Optim              `json:"optim"`
	Epochs         int                `json:"epochs"`    // passes over the pairs
	Minibatch      int                `json:"minibatch"` // pairs per optimizer step (0: all)
	FreshOptimizer bool               `json:"fresh_optimizer"`
	// Iteration (0-based), Iterations (the phase's) and LRScale (back-tracking's factor) place the
	// step on the phase's learning-rate schedule, as a PolicyStepInput's do.
	Iteration  int     `json:"iteration"`
	Iterations int     `json:"iterations"`
	LRScale    float64 `json:"lr_scale"`
	// InjectNaN makes the step's loss non-finite (tests of the back-tracking branch).
	InjectNaN bool `json:"inject_nan,omitempty"`
}
