package lm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/verify"
)

// scoreHeldout scores the greedy completions texts of heldout with in.Verifiers (none: nothing to
// do) into metrics: heldout_score, the composition's mean score, and heldout_score_<label>, each
// component's mean (report-only ones too), and of its sub-scores (heldout_score_<label>_<sub>,
// over the completions that have one). With in.Log the completions and their verdicts are kept
// at trainapi.EvalSamplesKey, so that a report can show the same held-out prompts across the
// phase; a retried evaluation writes the same object again.
func (a *Activities) scoreHeldout(ctx context.Context, in trainapi.EvalInput, heldout []tasks.Example, texts []string, metrics map[string]float64) error {
	if len(in.Verifiers) == 0 {
		return nil
	}
	if a.Verifiers == nil {
		return train.BadInput(errors.New("train: evaluate: eval.verifiers: this trainer has no verifiers wired (workers wire the reward role's)"))
	}
	comp, err := a.Verifiers.Compose(verify.Spec{Verifiers: in.Verifiers})
	if err != nil {
		return train.BadInput(fmt.Errorf("train: evaluate %s: eval.verifiers: %w", in.Checkpoint, err))
	}
	sums, counts := map[string]float64{}, map[string]int{}
	var total float64
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	for i, ex := range heldout {
		v, err := comp.Verify(ctx, verify.Sample{Prompt: ex.Prompt, Completion: texts[i], Reference: evalReference(ex)})
		if err != nil {
			// A verifier that cannot judge (a critic that cannot load) is the worker's trouble, retried.
			return fmt.Errorf("train: evaluate %s: verify held-out %d: %w", in.Checkpoint, i, err)
		}
		total += v.Score
		for _, k := range slices.Sorted(maps.Keys(v.Partial)) { // the same sums on every run
			sums[k] += v.Partial[k]
			counts[k]++
		}
		if err := enc.Encode(trainapi.EvalSample{Index: i, Prompt: ex.Prompt, Completion: texts[i], Score: v.Score, Partial: v.Partial}); err != nil {
			return fmt.Errorf("train: evaluate: encode sample %d: %w", i, err)
		}
	}
	n := float64(len(heldout))
	metrics["heldout_score"] = total / n
	for k, sum := range sums {
		metrics["heldout_score_"+strings.ReplaceAll(k, "/", "_")] = sum / float64(counts[k])
	}
	if in.Log == nil {
		return nil
	}
	st, err := a.Ckpt.Store(ctx, in.Store)
	if err != nil {
		return fmt.Errorf("train: evaluate: store %s: %w", in.Store, err)
	}
	key := trainapi.EvalSamplesKey(in.Log.Run, in.Log.Phase, in.Log.Step)
	if _, err := st.Put(ctx, key, &lines); err != nil {
		return fmt.Errorf("train: evaluate: write %s: %w", st.URI(key), err)
	}
	return nil
}

// evalReference is the verifiers' reference of a held-out example, as a rollout of it gets one
// (activities/reward): a built-in task's task, prompt and answer; else none (verifier params hold
// the constraints).
func evalReference(ex tasks.Example) json.RawMessage {
	if ex.Task == "" {
		return nil
	}
	b, _ := json.Marshal(map[string]string{"task": ex.Task, "prompt": ex.Prompt, "answer": ex.Answer})
	return b
}
