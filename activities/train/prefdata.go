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
	"path"
	"strings"

	"github.com/gomlx/gomlx/core/tensors"
	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
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
	b, err := readObject(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	exs, err := tasks.ReadPrefAll(bytes.NewReader(b), uri)
	if err != nil {
		return nil, badInput(err)
	}
	if len(exs) == 0 {
		return nil, badInput(fmt.Errorf("train: %s has no examples", uri))
	}
	return exs, nil
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

// encodedItem holds an item's two sequences as token ids with their trained-token flags.
type encodedItem [2]data.Encoded

// encodeItems encodes every item's two sequences; a sequence longer than maxSeq (when > 0) is an error
// naming the example.
func encodeItems(enc data.Encoder, items []prefItem, maxSeq int) ([]encodedItem, error) {
	out := make([]encodedItem, len(items))
	for i, it := range items {
		for s, c := range it.texts() {
			e, err := enc.Encode(it.Ex.AsExample(c))
			if err != nil {
				return nil, fmt.Errorf("train: encode preference example %d (%q): %w", i+1, it.Ex.ID, err)
			}
			if maxSeq > 0 && len(e.IDs) > maxSeq {
				return nil, fmt.Errorf("train: preference example %d (%q) has %d tokens, more than batch.seq %d: raise batch.seq", i+1, it.Ex.ID, len(e.IDs), maxSeq)
			}
			out[i][s] = e
		}
	}
	return out, nil
}

// prefSide is one side of a batch, one sequence per row, right-padded to seq (see objective.Pref*):
// mask[r][t] is 1 when token t+1 of row r is a trained completion token.
type prefSide struct {
	tokens, positions [][]int
	valid             [][]bool
	mask              [][]float32
}

// layoutSide lays out sequences as rows of seq tokens.
func layoutSide(seqs []data.Encoded, seq int) prefSide {
	var s prefSide
	for _, e := range seqs {
		tok, pos := make([]int, seq), make([]int, seq)
		valid, mask := make([]bool, seq), make([]float32, seq)
		for t := 0; t < seq; t++ {
			pos[t], tok[t] = t, tokenize.BytePAD
			if t < len(e.IDs) {
				tok[t], valid[t] = e.IDs[t], true
			}
			if t+1 < len(e.IDs) && e.Loss[t+1] {
				mask[t] = 1
			}
		}
		s.tokens, s.positions = append(s.tokens, tok), append(s.positions, pos)
		s.valid, s.mask = append(s.valid, valid), append(s.mask, mask)
	}
	return s
}

// longest is the length of the longest sequence, at least 2.
func longest(seqs []data.Encoded) int {
	n := 2
	for _, e := range seqs {
		n = max(n, len(e.IDs))
	}
	return n
}

// batch is the side as an engine batch for LogProbs: Targets[r][t] = tokens[r][t+1].
func (s prefSide) batch() Batch {
	b := Batch{Tokens: s.tokens, LossMask: s.mask, Positions: s.positions, Valid: s.valid}
	for _, row := range s.tokens {
		tgt := make([]int, len(row))
		copy(tgt, row[1:])
		tgt[len(row)-1] = tokenize.BytePAD
		b.Targets = append(b.Targets, tgt)
	}
	return b
}

// tensors are the side's four objective inputs: tokens, positions [rows, seq] int32, valid bool, mask
// float32.
func (s prefSide) tensors() []*tensors.Tensor {
	return []*tensors.Tensor{prefI32(s.tokens), prefI32(s.positions), prefBool(s.valid), prefF32(s.mask)}
}

// counted returns the values of lp at the side's counted positions, row by row.
func (s prefSide) counted(lp [][]float32) [][]float32 {
	out := make([][]float32, len(s.mask))
	for r, m := range s.mask {
		for t, w := range m {
			if w != 0 {
				out[r] = append(out[r], lp[r][t])
			}
		}
	}
	return out
}

// scatter places each row's counted values at its counted positions: the inverse of counted, zeros
// elsewhere. A row whose count differs is an error (the reference object does not match the data).
func (s prefSide) scatter(vals [][]float32) ([][]float32, error) {
	out := make([][]float32, len(s.mask))
	for r, m := range s.mask {
		out[r] = make([]float32, len(m))
		k := 0
		for t, w := range m {
			if w != 0 {
				if k >= len(vals[r]) {
					return nil, fmt.Errorf("row %d: %d reference log-probs for more counted tokens", r, len(vals[r]))
				}
				out[r][t] = vals[r][k]
				k++
			}
		}
		if k != len(vals[r]) {
			return nil, fmt.Errorf("row %d: %d reference log-probs for %d counted tokens", r, len(vals[r]), k)
		}
	}
	return out, nil
}

// masked zeroes lp outside the side's counted positions.
func (s prefSide) masked(lp [][]float32) [][]float32 {
	out := make([][]float32, len(lp))
	for r := range lp {
		out[r] = make([]float32, len(lp[r]))
		for t, w := range s.mask[r] {
			if w != 0 {
				out[r][t] = lp[r][t]
			}
		}
	}
	return out
}

func prefI32(x [][]int) *tensors.Tensor {
	rows, cols := len(x), len(x[0])
	flat := make([]int32, 0, rows*cols)
	for _, r := range x {
		for _, v := range r {
			flat = append(flat, int32(v))
		}
	}
	return tensors.FromFlatDataAndDimensions(flat, rows, cols)
}

func prefF32(x [][]float32) *tensors.Tensor {
	rows, cols := len(x), len(x[0])
	flat := make([]float32, 0, rows*cols)
	for _, r := range x {
		flat = append(flat, r...)
	}
	return tensors.FromFlatDataAndDimensions(flat, rows, cols)
}

func prefBool(x [][]bool) *tensors.Tensor {
	rows, cols := len(x), len(x[0])
	flat := make([]bool, 0, rows*cols)
	for _, r := range x {
		flat = append(flat, r...)
	}
	return tensors.FromFlatDataAndDimensions(flat, rows, cols)
}

// seqLogProbs returns, for each item, the model's log-probs of the counted tokens of its two sequences
// (each sequence scored on its own row, batches of evalRows), heartbeating progress.
func seqLogProbs(ctx context.Context, eng Engine, enc []encodedItem, beat func(n int)) ([][2][]float32, error) {
	out := make([][2][]float32, len(enc))
	for lo := 0; lo < len(enc); lo += evalRows {
		hi := min(lo+evalRows, len(enc))
		for s := 0; s < 2; s++ {
			seqs := make([]data.Encoded, 0, hi-lo)
			for _, e := range enc[lo:hi] {
				seqs = append(seqs, e[s])
			}
			side := layoutSide(seqs, longest(seqs))
			lp, err := eng.LogProbs(side.batch())
			if err != nil {
				return nil, err
			}
			for r, v := range side.counted(lp) {
				out[lo+r][s] = v
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if beat != nil {
			beat(hi - lo)
		}
	}
	return out, nil
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

// RefLogProbsKey is where a phase's precomputed reference object lives, relative to the store root; hash
// identifies the reference checkpoint and data.
func RefLogProbsKey(run, phase, hash string) string {
	return path.Join("runs", run, phase, "ref", "train-"+hash+".jsonl")
}

// RefLogProbs computes the reference model's log-probs of every training sequence once (they hold for
// every pass over the data), and writes them with the data as one JSONL object of RefLines in the store,
// so that training never holds the reference model. The object's key derives from run, phase, reference
// and data, so a retry finds the object an earlier attempt wrote.
func (a *Activities) RefLogProbs(ctx context.Context, in RefLogProbsInput) (RefLogProbsOutput, error) {
	op := fmt.Sprintf("train: reference log-probs %s/%s", in.Run, in.Phase)
	if in.Reference == "" {
		return RefLogProbsOutput{}, badInput(fmt.Errorf("%s: no reference checkpoint", op))
	}
	key := RefLogProbsKey(in.Run, in.Phase, inputHash(struct {
		Ref  string
		Data PrefDataSpec
		Kind string
		Seed uint64
	}{in.Reference, in.Data, in.Kind, in.Seed}))
	if uri, ok, err := existingObject(ctx, a.Ckpt, in.Store, key); err != nil {
		return RefLogProbsOutput{}, err
	} else if ok {
		items, err := readRefItems(ctx, a.Ckpt, uri)
		if err != nil {
			return RefLogProbsOutput{}, err
		}
		return RefLogProbsOutput{RefData: uri, Examples: len(items), Resumed: true}, nil
	}
	trainEx, _, err := PrefExamples(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return RefLogProbsOutput{}, err
	}
	items, err := prefTrainItems(trainEx, in.Kind)
	if err != nil {
		return RefLogProbsOutput{}, badInput(fmt.Errorf("%s: %w", op, err))
	}
	enc, err := encodeItems(encoder(), items, in.Seq)
	if err != nil {
		return RefLogProbsOutput{}, badInput(err)
	}
	eng, _, _, err := a.loadEngine(ctx, in.Reference, Optim{}, false)
	if err != nil {
		return RefLogProbsOutput{}, err
	}
	defer eng.Close()
	done := 0
	lps, err := seqLogProbs(ctx, eng, enc, func(n int) {
		done += n
		if activity.IsActivity(ctx) { // also called outside activities (temper data gen --from)
			activity.RecordHeartbeat(ctx, Progress{Step: done, Total: len(items)})
		}
	})
	if err != nil {
		return RefLogProbsOutput{}, fmt.Errorf("%s: %w", op, err)
	}
	var buf bytes.Buffer
	je := json.NewEncoder(&buf)
	je.SetEscapeHTML(false)
	for i := range items {
		items[i].Ref = lps[i]
		if err := je.Encode(items[i].line()); err != nil {
			return RefLogProbsOutput{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	uri, err := putObject(ctx, a.Ckpt, in.Store, key, buf.Bytes())
	if err != nil {
		return RefLogProbsOutput{}, err
	}
	return RefLogProbsOutput{RefData: uri, Examples: len(items)}, nil
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

// PrefFromModelKey is where the pairs of PreferencesFromModel live, relative to the store root; split is
// "train" or "heldout".
func PrefFromModelKey(run, phase, hash, split string) string {
	return path.Join("runs", run, phase, "data", "model-pairs-"+hash+"-"+split+".jsonl")
}

// PreferencesFromModel samples in.Sampling.Samples completions for each of in.Sampling.Prompts training
// prompts of the task from a checkpoint, checks them with the task's verifier and pairs a correct
// completion (chosen; the task's reference answer when none is correct, unless DropUnsolved) with an
// incorrect one (rejected). Prompts whose samples are all correct teach nothing and are dropped. Unless
// SyntheticHeldout, the task's held-out prompts (Data.HeldoutExamples, the same an sft phase with the
// same seed held out) get pairs the same way, so that evaluation asks how often the model prefers the
// verified-correct answer over its own mistakes. Sampling is seeded per (split, prompt, sample), so a
// retry writes the same objects, at keys derived from the input.
func (a *Activities) PreferencesFromModel(ctx context.Context, in PrefFromModelInput) (PrefFromModelOutput, error) {
	op := fmt.Sprintf("train: preferences from %s", in.Checkpoint)
	s := in.Sampling.WithDefaults()
	task, err := tasks.Lookup(in.Data.Task)
	if err != nil {
		return PrefFromModelOutput{}, badInput(fmt.Errorf("%s: %w", op, err))
	}
	if s.Samples < 2 || s.Prompts < 1 {
		return PrefFromModelOutput{}, badInput(fmt.Errorf("%s: %d prompts × %d samples: want ≥ 1 × ≥ 2", op, s.Prompts, s.Samples))
	}
	seed := in.Seed
	if in.Data.Seed != 0 {
		seed = in.Data.Seed
	}
	hash := inputHash(struct {
		C string
		D PrefDataSpec
		S PrefSampling
		N uint64
	}{in.Checkpoint, in.Data, s, seed})
	trainKey, heldKey := PrefFromModelKey(in.Run, in.Phase, hash, "train"), PrefFromModelKey(in.Run, in.Phase, hash, "heldout")
	statsKey := strings.TrimSuffix(trainKey, ".jsonl") + ".stats.json"
	// The stats object is written last: when it exists, so do the pairs.
	if uri, ok, err := existingObject(ctx, a.Ckpt, in.Store, statsKey); err != nil {
		return PrefFromModelOutput{}, err
	} else if ok {
		b, err := readObject(ctx, a.Ckpt, uri)
		if err != nil {
			return PrefFromModelOutput{}, err
		}
		var out PrefFromModelOutput
		if err := json.Unmarshal(b, &out); err != nil {
			return PrefFromModelOutput{}, fmt.Errorf("%s: %s: %w", op, uri, err)
		}
		out.Resumed = true
		return out, nil
	}
	// Training prompts come from the training split only: never a held-out prompt.
	trainPrompts, heldPrompts := tasks.Split(task, s.Prompts, in.Data.HeldoutExamples, seed)
	eng, _, _, err := a.loadEngine(ctx, in.Checkpoint, Optim{}, false)
	if err != nil {
		return PrefFromModelOutput{}, err
	}
	defer eng.Close()
	total := len(trainPrompts)
	if !s.SyntheticHeldout {
		total += len(heldPrompts)
	}
	done := 0
	beat := func(n int) {
		done += n
		if activity.IsActivity(ctx) { // also called outside activities (temper data gen --from)
			activity.RecordHeartbeat(ctx, Progress{Step: done, Total: total})
		}
	}
	pairs, st, err := samplePairs(ctx, eng, trainPrompts, s, seed, 0, beat)
	if err != nil {
		return PrefFromModelOutput{}, fmt.Errorf("%s: %w", op, err)
	}
	if len(pairs) == 0 {
		return PrefFromModelOutput{}, badInput(fmt.Errorf("%s: no pairs: %d of %d prompts had only correct samples", op, st.AllCorrect, len(trainPrompts)))
	}
	out := st
	if out.Train, err = writePairs(ctx, a.Ckpt, in.Store, trainKey, pairs); err != nil {
		return PrefFromModelOutput{}, err
	}
	if !s.SyntheticHeldout && len(heldPrompts) > 0 {
		held, _, err := samplePairs(ctx, eng, heldPrompts, s, seed, 1, beat)
		if err != nil {
			return PrefFromModelOutput{}, fmt.Errorf("%s: held-out: %w", op, err)
		}
		if len(held) == 0 {
			return PrefFromModelOutput{}, badInput(fmt.Errorf("%s: no held-out pairs: every sample of the %d held-out prompts is correct (set synthetic_heldout)", op, len(heldPrompts)))
		}
		out.HeldoutPairs = len(held)
		if out.Heldout, err = writePairs(ctx, a.Ckpt, in.Store, heldKey, held); err != nil {
			return PrefFromModelOutput{}, err
		}
	}
	b, _ := json.Marshal(out)
	if _, err := putObject(ctx, a.Ckpt, in.Store, statsKey, b); err != nil {
		return PrefFromModelOutput{}, err
	}
	return out, nil
}

func writePairs(ctx context.Context, cl *ckpt.Client, root, key string, pairs []tasks.PrefExample) (string, error) {
	var buf bytes.Buffer
	if err := tasks.WritePrefJSONL(&buf, pairs); err != nil {
		return "", err
	}
	return putObject(ctx, cl, root, key, buf.Bytes())
}

// samplePairs samples s.Samples completions per prompt (seeded by seed, split, prompt and sample) and pairs
// a verified-correct completion with a wrong one; it returns the pairs and the stats of the prompts.
func samplePairs(ctx context.Context, eng Engine, prompts []tasks.Example, s PrefSampling, seed uint64, split int, beat func(int)) ([]tasks.PrefExample, PrefFromModelOutput, error) {
	enc := encoder()
	st := PrefFromModelOutput{Prompts: len(prompts)}
	var pairs []tasks.PrefExample
	correct, total := 0, 0
	per := max(1, evalRows/s.Samples)
	for lo := 0; lo < len(prompts); lo += per {
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		hi := min(lo+per, len(prompts))
		var batch [][]int
		var seeds []uint64
		for i := lo; i < hi; i++ {
			ids, err := enc.PromptIDs(prompts[i])
			if err != nil {
				return nil, st, badInput(err)
			}
			for k := 0; k < s.Samples; k++ {
				batch = append(batch, ids)
				seeds = append(seeds, seed*1_000_003+uint64(split)*100_000_007+uint64(i*s.Samples+k)+7)
			}
		}
		outs, err := eng.Generate(batch, sample.Options{MaxNewTokens: s.MaxNewTokens, Temperature: s.Temperature,
			StopTokens: []int{tokenize.ByteEOS}, Seeds: seeds})
		if err != nil {
			return nil, st, fmt.Errorf("generate: %w", err)
		}
		for i := lo; i < hi; i++ {
			ex := prompts[i]
			var good, bad string
			var hasGood, hasBad bool
			for k := 0; k < s.Samples; k++ {
				text := enc.Tok.Decode(stripStop(outs[(i-lo)*s.Samples+k].Tokens))
				total++
				if passes(ex, text) {
					correct++
					if !hasGood {
						good, hasGood = text, true
					}
				} else if !hasBad && text != "" {
					bad, hasBad = text, true
				}
			}
			switch {
			case !hasBad:
				st.AllCorrect++
				continue
			case !hasGood:
				st.NoneCorrect++
				if s.DropUnsolved {
					continue
				}
				good = ex.Completion
			}
			if good == bad {
				continue
			}
			pairs = append(pairs, tasks.PrefExample{ID: ex.ID, Task: ex.Task, Prompt: ex.Prompt, Chosen: good, Rejected: bad, Answer: ex.Answer})
		}
		beat(hi - lo)
	}
	st.Pairs = len(pairs)
	st.SampleRate = float64(correct) / float64(max(1, total))
	return pairs, st, nil
}
