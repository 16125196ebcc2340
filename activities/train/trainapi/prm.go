package trainapi

import (
	"fmt"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/internal/config"
)

// Activity names of the process-reward-model trainer (the prm phase; its init is RewardInitName).
const (
	PRMChunkName    = "train.PRMChunk"
	PRMEvaluateName = "train.PRMEvaluate"
)

// PRMData says where step-labelled solutions (tasks.StepExample) come from: a built-in task whose
// lines are checkable (tasks.StepSplit: each example's reference solution and one with a slipped
// step, labelled by CheckStep), or JSONL files of step-labelled lines in the store (a search
// phase's steps object through from_data, or your own).
type PRMData struct {
	Task            string  `json:"task,omitempty" help:"built-in task with a per-line checker (expr) whose synthetic step labels to use"`
	TrainExamples   int     `json:"train_examples,omitempty" default:"2000" help:"task examples drawn (two labelled solutions each: the reference and one slipped step)"`
	HeldoutExamples int     `json:"heldout_examples,omitempty" default:"200" help:"held-out task examples, prompts disjoint from training"`
	Train           string  `json:"train,omitempty" help:"JSONL URI of {prompt, steps, labels} lines instead of a task (from_data: a search phase's step labels)"`
	Heldout         string  `json:"heldout,omitempty" help:"held-out JSONL URI; without it and with heldout_share > 0 the training lines are split by prompt"`
	HeldoutShare    float64 `json:"heldout_share,omitempty" default:"0.2" help:"with train and no heldout: the share of distinct prompts held out (those of smallest hash, at least one; every solution of a prompt stays on one side)"`
	Seed            uint64  `json:"seed,omitempty" help:"data seed; 0 uses the pipeline seed"`
}

// Validate names the bad field.
func (d PRMData) Validate() error {
	if !(d.HeldoutShare >= 0 && d.HeldoutShare < 1) {
		return &config.FieldError{Path: "data.heldout_share", Msg: fmt.Sprintf("%g: want 0 <= share < 1", d.HeldoutShare)}
	}
	return checkSource(d.Task, d.Train, d.Heldout, d.TrainExamples, d.HeldoutExamples, "data.train_examples", func(t tasks.Task) error {
		if _, ok := t.(tasks.Stepwise); !ok {
			return &config.FieldError{Path: "data.task", Msg: fmt.Sprintf("%q does not check single steps, so it has no synthetic step labels (expr does)", d.Task)}
		}
		return nil
	})
}

// PRMBatch is the shape of a process-reward-model step.
type PRMBatch struct {
	Rows     int `json:"rows" default:"32" help:"labelled solutions per step"`
	MaxSeq   int `json:"max_seq" default:"64" help:"longest tokenized prompt+solution; steps that end past it are not scored (batches pad to the next power of two >= 8)"`
	MaxSteps int `json:"max_steps" default:"8" help:"steps scored per solution at most (the first ones)"`
}

// Validate names the bad field.
func (b PRMBatch) Validate() error {
	if b.MaxSteps < 1 || b.MaxSteps > 256 {
		return &config.FieldError{Path: "batch.max_steps", Msg: fmt.Sprintf("%d: want 1..256", b.MaxSteps)}
	}
	return checkBatch(b.Rows, "batch.max_seq", b.MaxSeq)
}

// PRM class weightings (PRMLoss.Balance).
const (
	PRMBalanceLabels = "labels"
	PRMBalanceNone   = "none"
)

// PRMLoss says how the process-reward loss weighs its steps.
type PRMLoss struct {
	// Balance "" (inputs recorded before the field) is none.
	Balance string `json:"balance" default:"labels" help:"labels: weigh each class's steps by total/(2·count) over the training labels, so that calling every step wrong (most search-tree steps are) does not pay | none: every step weighs 1"`
}

// Validate names the bad field and the allowed values.
func (l PRMLoss) Validate() error {
	if l.Balance != "" && l.Balance != PRMBalanceLabels && l.Balance != PRMBalanceNone {
		return &config.FieldError{Path: "loss.balance", Msg: fmt.Sprintf("%q: allowed values: %s, %s", l.Balance, PRMBalanceLabels, PRMBalanceNone)}
	}
	return nil
}

// PRMChunkInput trains Steps process-reward steps from From (Cursor: the position in the training
// solutions).
type PRMChunkInput struct {
	ChunkHead
	Data  PRMData  `json:"data"`
	Batch PRMBatch `json:"batch"`
	Loss  PRMLoss  `json:"loss"`
}

// PRMEvalInput evaluates a process reward model on held-out step-labelled solutions.
type PRMEvalInput struct {
	Store      string   `json:"store"`
	Checkpoint string   `json:"checkpoint"`
	Data       PRMData  `json:"data"`
	Batch      PRMBatch `json:"batch"`
	// Examples caps how many held-out solutions are used (0: all).
	Examples int    `json:"examples"`
	Seed     uint64 `json:"seed"`
}
