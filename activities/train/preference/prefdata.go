package preference

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/tasks"
)

// PrefExamples returns the train and held-out preference examples of spec (seed used when spec.Seed is
// 0), as read: pairs, or unpaired examples from files.
func PrefExamples(ctx context.Context, cl *ckpt.Client, spec trainapi.PrefDataSpec, seed uint64) (trainEx, heldout []tasks.PrefExample, err error) {
	if spec.Seed != 0 {
		seed = spec.Seed
	}
	if spec.Task != "" && (spec.Train == "" || spec.Heldout == "") {
		task, err := tasks.Lookup(spec.Task)
		if err != nil {
			return nil, nil, train.BadInput(err)
		}
		if spec.Train == "" {
			trainEx, heldout, err = tasks.PrefSplit(task, spec.TrainExamples, spec.HeldoutExamples, seed)
		} else {
			_, heldout, err = tasks.PrefSplit(task, 0, spec.HeldoutExamples, seed)
		}
		if err != nil {
			return nil, nil, train.BadInput(err)
		}
	}
	if spec.Train != "" {
		if trainEx, err = readPrefJSONL(ctx, cl, spec.Train); err != nil {
			return nil, nil, err
		}
	}
	if spec.Heldout != "" {
		if heldout, err = readPrefJSONL(ctx, cl, spec.Heldout); err != nil {
			return nil, nil, err
		}
	}
	return trainEx, heldout, nil
}

// readPrefJSONL reads a preference dataset; a malformed line is a non-retryable error naming file and line.
func readPrefJSONL(ctx context.Context, cl *ckpt.Client, uri string) ([]tasks.PrefExample, error) {
	return train.ReadLines(ctx, cl, uri, tasks.ReadPrefAll)
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
	if kind != losscfg.PrefKTO {
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
	b, err := train.ReadObject(ctx, cl, uri)
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
			return nil, train.BadInput(&tasks.LineError{File: uri, Line: n, Err: err})
		}
		if err := l.Check(); err != nil {
			return nil, train.BadInput(&tasks.LineError{File: uri, Line: n, Err: err})
		}
		it := prefItem{Ex: l.PrefExample, KL: l.KLCompletion, Ref: [2][]float32{l.RefChosen, l.RefRejected}}
		if !l.Paired() {
			it.Ref = [2][]float32{l.RefCompletion, l.RefKL}
		}
		if it.Ref[0] == nil || it.Ref[1] == nil {
			return nil, train.BadInput(&tasks.LineError{File: uri, Line: n, Err: errors.New("no reference log-probs")})
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, train.BadInput(fmt.Errorf("train: read %s: %w", uri, err))
	}
	if len(items) == 0 {
		return nil, train.BadInput(fmt.Errorf("train: %s has no examples", uri))
	}
	return items, nil
}
