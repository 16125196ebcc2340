package train

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/loss"
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
	if p.Prompts == 0 {
		p.Prompts = 1000
	}
	if p.Samples == 0 {
		p.Samples = 8
	}
	if p.Temperature == 0 {
		p.Temperature = 1
	}
	if p.MaxNewTokens == 0 {
		p.MaxNewTokens = 16
	}
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
	for _, f := range []struct{ path, uri string }{{"data.train", d.Train}, {"data.heldout", d.Heldout}} {
		if f.uri != "" && !strings.HasPrefix(f.uri, "file:///") && !strings.HasPrefix(f.uri, "gs://") {
			return &config.FieldError{Path: f.path, Msg: fmt.Sprintf("%q: want file:///abs/file.jsonl or gs://bucket/file.jsonl", f.uri)}
		}
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

// PrefExamples returns the train and held-out preference examples of spec (seed used when spec.Seed is
// 0), as read: pairs, or unpaired examples from files.
func PrefExamples(ctx context.Context, cl *ckpt.Client, spec PrefDataSpec, seed uint64) (train, heldout []tasks.PrefExample, err error) {
	if spec.Seed != 0 {
		seed = spec.Seed
	}
	if spec.Task != "" && (spec.Train == "" || spec.Heldout == "") {
		task, err := tasks.Lookup(spec.Task)
		if err != nil {
			return nil, nil, badInput(err)
		}
		if spec.Train == "" {
			train, heldout, err = tasks.PrefSplit(task, spec.TrainExamples, spec.HeldoutExamples, seed)
		} else {
			_, heldout, err = tasks.PrefSplit(task, 0, spec.HeldoutExamples, seed)
		}
		if err != nil {
			return nil, nil, badInput(err)
		}
	}
	if spec.Train != "" {
		if train, err = readPrefJSONL(ctx, cl, spec.Train); err != nil {
			return nil, nil, err
		}
	}
	if spec.Heldout != "" {
		if heldout, err = readPrefJSONL(ctx, cl, spec.Heldout); err != nil {
			return nil, nil, err
		}
	}
	return train, heldout, nil
}

// readPrefJSONL reads a preference dataset; a malformed line is a non-retryable error naming file and line.
func readPrefJSONL(ctx context.Context, cl *ckpt.Client, uri string) ([]tasks.PrefExample, error) {
	return readLines(ctx, cl, uri, tasks.ReadPrefAll)
}

// putObject writes body at key of the store root and returns its URI.
func putObject(ctx context.Context, cl *ckpt.Client, root, key string, body []byte) (string, error) {
	uri, err := cl.PutObject(ctx, root, key, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	return uri, nil
}

// existingObject returns the URI of key when it already exists (an earlier attempt wrote it).
func existingObject(ctx context.Context, cl *ckpt.Client, root, key string) (string, bool, error) {
	uri, ok, err := cl.StatObject(ctx, root, key)
	if err != nil {
		return "", false, fmt.Errorf("train: %w", err)
	}
	return uri, ok, nil
}

func inputHash(v any) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}

// prefItem is one training or evaluation row of a preference phase: a pair (chosen, rejected) or, for
// kto, a labelled completion with its mismatched KL completion; with the reference log-probs of their
// counted tokens when they were precomputed.
type prefItem struct {
	Ex tasks.PrefExample
	// KL is kto's mismatched completion for Ex.Prompt (another prompt's completion).
	KL string
	// Ref holds the reference log-probs of the counted tokens (completion and EOS) of the two sequences:
	// pair: chosen, rejected; kto: completion, KL. Nil when not precomputed.
	Ref [2][]float32
}

// texts are the two completions of the item's sequences.
func (it prefItem) texts() [2]string {
	if it.Ex.Paired() {
		return [2]string{it.Ex.Chosen, it.Ex.Rejected}
	}
	return [2]string{it.Ex.Completion, it.KL}
}

// RefLine is one line of a precomputed reference object: the example, kto's mismatched completion, and
// the reference log-probs of the counted tokens (the completion and EOS, in order) of each sequence.
type RefLine struct {
	tasks.PrefExample
	KLCompletion  string    `json:"kl_completion,omitempty"`
	RefChosen     []float32 `json:"ref_chosen,omitempty"`
	RefRejected   []float32 `json:"ref_rejected,omitempty"`
	RefCompletion []float32 `json:"ref_completion,omitempty"`
	RefKL         []float32 `json:"ref_kl,omitempty"`
}

// prefTrainItems turns training examples into the rows of a phase of kind: pairs for the pairwise kinds
// (an unpaired line is an error), labelled completions with mismatched KL completions for kto.
func prefTrainItems(exs []tasks.PrefExample, kind string) ([]prefItem, error) {
	if kind != loss.PrefKTO {
		items := make([]prefItem, len(exs))
		for i, ex := range exs {
			if !ex.Paired() {
				return nil, fmt.Errorf("example %d (%q) is unpaired; %s needs {prompt, chosen, rejected} pairs", i+1, ex.ID, kind)
			}
			items[i] = prefItem{Ex: ex}
		}
		return items, nil
	}
	un := tasks.Unpair(exs)
	items := make([]prefItem, len(un))
	for i, ex := range un {
		items[i] = prefItem{Ex: ex, KL: klCompletion(un, i)}
	}
	return items, nil
}

// klCompletion is the completion kto pairs with example i's prompt to estimate its reference point: the
// completion of the next example (cyclically) whose prompt differs, a fixed mismatched pair (x_i, y_j≠i)
// so that its reference log-probs can be precomputed.
func klCompletion(exs []tasks.PrefExample, i int) string {
	for d := 1; d < len(exs); d++ {
		j := (i + d) % len(exs)
		if exs[j].Prompt != exs[i].Prompt {
			return exs[j].Completion
		}
	}
	return exs[(i+1)%len(exs)].Completion
}

func (it prefItem) line() RefLine {
	l := RefLine{PrefExample: it.Ex, KLCompletion: it.KL}
	if it.Ex.Paired() {
		l.RefChosen, l.RefRejected = it.Ref[0], it.Ref[1]
	} else {
		l.RefCompletion, l.RefKL = it.Ref[0], it.Ref[1]
	}
	return l
}

// readRefItems reads a precomputed reference object (RefLogProbs' output) back into rows.
func readRefItems(ctx context.Context, cl *ckpt.Client, uri string) ([]prefItem, error) {
	b, err := readObject(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), tasks.MaxLineBytes)
	var items []prefItem
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l RefLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, badInput(&tasks.LineError{File: uri, Line: n, Err: err})
		}
		if err := l.Check(); err != nil {
			return nil, badInput(&tasks.LineError{File: uri, Line: n, Err: err})
		}
		it := prefItem{Ex: l.PrefExample, KL: l.KLCompletion, Ref: [2][]float32{l.RefChosen, l.RefRejected}}
		if !l.Paired() {
			it.Ref = [2][]float32{l.RefCompletion, l.RefKL}
		}
		if it.Ref[0] == nil || it.Ref[1] == nil {
			return nil, badInput(&tasks.LineError{File: uri, Line: n, Err: errors.New("no reference log-probs")})
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, badInput(fmt.Errorf("train: read %s: %w", uri, err))
	}
	if len(items) == 0 {
		return nil, badInput(fmt.Errorf("train: %s has no examples", uri))
	}
	return items, nil
}
