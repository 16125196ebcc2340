package trainapi

import (
	"fmt"

	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/internal/config"
)

// Reward-model activity names, registered by workers on the trainer queue.
const (
	RewardInitName     = "train.RewardInit"
	RewardChunkName    = "train.RewardChunk"
	RewardEvaluateName = "train.RewardEvaluate"
)

// RewardData says where preference pairs come from: a built-in task's synthetic pairs (its
// correct answer chosen, a plausible mistake rejected; tasks.PrefSplit) or JSONL files of
// tasks.PrefExample lines in the store (unpaired completion/label lines are paired up by prompt).
type RewardData struct {
	Task         string `json:"task,omitempty" help:"built-in task whose synthetic pairs to use (correct answer vs a plausible mistake): add2, add, addsub, mul, expr, expr3, router"`
	TrainPairs   int    `json:"train_pairs,omitempty" default:"4000" help:"training pairs drawn (built-in task)"`
	HeldoutPairs int    `json:"heldout_pairs,omitempty" default:"400" help:"held-out pairs, prompts disjoint from training (built-in task)"`
	Train        string `json:"train,omitempty" help:"JSONL URI (file:///... or gs://...) of {prompt, chosen, rejected} lines instead of a task"`
	Heldout      string `json:"heldout,omitempty" help:"held-out JSONL URI"`
	Seed         uint64 `json:"seed,omitempty" help:"data seed; 0 uses the pipeline seed"`
}

// Validate names the bad field.
func (d RewardData) Validate() error {
	return checkSource(d.Task, d.Train, d.Heldout, d.TrainPairs, d.HeldoutPairs, "data.train_pairs", func(t tasks.Task) error {
		if _, ok := t.(tasks.Mistaker); !ok {
			return &config.FieldError{Path: "data.task", Msg: fmt.Sprintf("%q has no synthetic preference pairs (it cannot write wrong answers)", d.Task)}
		}
		return nil
	})
}

// RewardBatch is the shape of a reward-model step.
type RewardBatch struct {
	Rows   int `json:"rows" default:"32" help:"preference pairs per step (2×rows sequences run through the model)"`
	MaxSeq int `json:"max_seq" default:"64" help:"longest tokenized prompt+completion; a longer pair is an error. Batches pad to the next power of two (>= 8)"`
}

// Validate names the bad field.
func (b RewardBatch) Validate() error { return checkBatch(b.Rows, "batch.max_seq", b.MaxSeq) }

// RewardInitInput asks for step 0 of a reward phase: From with a value head, or a fresh seeded
// model with one when From is empty.
type RewardInitInput struct {
	Store string `json:"store"`
	Run   string `json:"run"`
	Phase string `json:"phase"`
	// From is the starting checkpoint (an SFT or pretrained model, or a reward model); "" starts
	// from scratch with Model.
	From  string          `json:"from,omitempty"`
	Model modelcfg.Config `json:"model"`
	// Seed initialises the fresh model, or the value head when From has none.
	Seed uint64 `json:"seed"`
	// LogProb gives a new head the generative term (modelcfg.Config.RewardLogProb: reward = value +
	// α·Σ log π(completion), α learned from 1). A From that is already a reward model keeps its head.
	LogProb bool `json:"logprob,omitempty"`
}

// RewardInitOutput is the phase's step-0 checkpoint.
type RewardInitOutput struct {
	Checkpoint string `json:"checkpoint"`
	// NewHead is true when the value head was initialised here (From had none, or no From).
	NewHead bool `json:"new_head"`
}

// RewardChunkInput trains Steps Bradley–Terry steps from From (Cursor: the position in the
// training pairs).
type RewardChunkInput struct {
	ChunkHead
	Data  RewardData            `json:"data"`
	Batch RewardBatch           `json:"batch"`
	Loss  objectivecfg.BTConfig `json:"loss"`
}

// RewardEvalInput evaluates a reward model on held-out pairs.
type RewardEvalInput struct {
	Store      string      `json:"store"`
	Checkpoint string      `json:"checkpoint"`
	Data       RewardData  `json:"data"`
	Batch      RewardBatch `json:"batch"` // MaxSeq applies; rows per evaluation batch is fixed (64)
	// Pairs caps how many held-out pairs are used (0: all).
	Pairs int                   `json:"pairs"`
	Loss  objectivecfg.BTConfig `json:"loss"`
	Seed  uint64                `json:"seed"`
}

// RewardEvalOutput holds scalar metrics, named as they appear in pipeline results.
type RewardEvalOutput struct {
	Metrics map[string]float64 `json:"metrics"`
}
