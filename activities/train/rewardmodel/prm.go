package rewardmodel

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"sort"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/tasks"
)

// stepData returns the train and held-out step-labelled solutions of spec; seed is used when
// spec.Seed is 0. Training lines without a held-out file are split by prompt (HeldoutShare).
func stepData(ctx context.Context, cl *ckpt.Client, spec trainapi.PRMData, seed uint64) (trainEx, heldout []tasks.StepExample, err error) {
	return splitData(spec, spec.Task, spec.Seed, seed, func(t tasks.Task, seed uint64) ([]tasks.StepExample, []tasks.StepExample, error) {
		return tasks.StepSplit(t, spec.TrainExamples, spec.HeldoutExamples, seed)
	}, func() ([]tasks.StepExample, []tasks.StepExample, error) {
		return stepFiles(ctx, cl, spec)
	})
}

// stepFiles returns the train and held-out step-labelled solutions of spec's files.
func stepFiles(ctx context.Context, cl *ckpt.Client, spec trainapi.PRMData) (trainEx, heldout []tasks.StepExample, err error) {
	all, err := train.ReadLines(ctx, cl, spec.Train, tasks.ReadStepAll)
	if err != nil {
		return nil, nil, err
	}
	if spec.Heldout != "" {
		if heldout, err = train.ReadLines(ctx, cl, spec.Heldout, tasks.ReadStepAll); err != nil {
			return nil, nil, err
		}
		return all, heldout, nil
	}
	held := heldOutPrompts(all, spec.HeldoutShare)
	for _, ex := range all {
		if held[ex.Prompt] {
			heldout = append(heldout, ex)
		} else {
			trainEx = append(trainEx, ex)
		}
	}
	if len(trainEx) == 0 {
		return nil, nil, train.BadInput(fmt.Errorf("train: %s: no step-labelled solutions left for training (data.heldout_share %g)", spec.Train, spec.HeldoutShare))
	}
	return trainEx, heldout, nil
}

// heldOutPrompts picks the held-out prompts: ⌈share·n⌉ of the n distinct prompts (at most n−1),
// those with the smallest hash. The split depends on the set of prompts only, every solution of one
// prompt lands on one side, and a small set still holds one out.
func heldOutPrompts(exs []tasks.StepExample, share float64) map[string]bool {
	type ph struct {
		prompt string
		h      uint64
	}
	seen := map[string]bool{}
	var ps []ph
	for _, ex := range exs {
		if !seen[ex.Prompt] {
			seen[ex.Prompt] = true
			h := fnv.New64a()
			h.Write([]byte(ex.Prompt))
			ps = append(ps, ph{ex.Prompt, h.Sum64()})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].h < ps[j].h || (ps[i].h == ps[j].h && ps[i].prompt < ps[j].prompt) })
	k := min(int(math.Ceil(share*float64(len(ps)))), len(ps)-1)
	out := map[string]bool{}
	for _, p := range ps[:max(k, 0)] {
		out[p.prompt] = true
	}
	return out
}

// classWeights are the loss's class weights for the training rows: with balance labels, each
// class's total/(2·count) over the steps the rows keep (objective.BalancedWeights), else the plain
// mean.
func classWeights(l trainapi.PRMLoss, rows []train.StepRow) objective.ClassWeights {
	if l.Balance != trainapi.PRMBalanceLabels {
		return objective.ClassWeights{}
	}
	var correct, total int
	for _, r := range rows {
		for _, y := range r.Labels {
			if y {
				correct++
			}
			total++
		}
	}
	return objective.BalancedWeights(correct, total)
}

// PRMChunk trains in.Steps steps of the process-reward objective (objective.PRM: the value head at
// every step's end, binary cross-entropy against the step labels, class-weighted as in.Loss says)
// from in.From; train.RunChunk does the rest. Its metrics are objective.PRMMetrics' chunk means,
// and solutions / solutions_per_s.
func (a *Activities) PRMChunk(ctx context.Context, in trainapi.PRMChunkInput) (trainapi.ChunkOutput, error) {
	op := fmt.Sprintf("train: prm chunk %s/%s", in.Run, in.Phase)
	for _, err := range []error{in.Batch.Validate(), in.Loss.Validate()} {
		if err != nil {
			return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
		}
	}
	return train.RunChunk(ctx, a.Activities, in.ChunkHead, op, func() (*train.ChunkObjective[[]int], error) {
		exs, _, err := stepData(ctx, a.Ckpt, in.Data, in.Cursor.Seed)
		if err != nil {
			return nil, err
		}
		rows, err := train.StepRows(exs, in.Batch.MaxSeq, in.Batch.MaxSteps)
		if err != nil {
			return nil, err
		}
		m, err := a.Load(ctx, in.From, train.LoadOptions{Optim: in.Optim, Optimizer: !in.FreshOptimizer, Head: train.HeadRequired})
		if err != nil {
			return nil, err
		}
		obj := objective.PRM(classWeights(in.Loss, rows))
		return train.RowsObjective(m, obj, "solutions", len(rows), in.Batch.Rows, func(idx []int) (objective.Batch, error) {
			batch := make([]train.StepRow, len(idx))
			for r, i := range idx {
				batch[r] = rows[i]
			}
			return train.StepBatch(batch, in.Batch.Rows, in.Batch.MaxSteps, in.Batch.MaxSeq), nil
		}), nil
	})
}

// prmEvalRows is how many held-out solutions go through the engine at once.
const prmEvalRows = 32

// PRMEvaluate measures a process reward model on held-out step-labelled solutions:
// heldout_step_accuracy (the fraction of steps whose score σ(z) is on the label's side of 0.5; the
// acceptance metric), heldout_step_accuracy_correct and _wrong (the same within each label) and
// heldout_balanced_accuracy (their mean, when both labels occur),
// heldout_solution_accuracy (the minimum step score against the minimum label: the outcome the prm
// verifier reports), heldout_bce and the counts.
func (a *Activities) PRMEvaluate(ctx context.Context, in trainapi.PRMEvalInput) (trainapi.RewardEvalOutput, error) {
	if err := in.Batch.Validate(); err != nil {
		return trainapi.RewardEvalOutput{}, train.BadInput(fmt.Errorf("train: prm evaluate %s: %w", in.Checkpoint, err))
	}
	_, heldout, err := stepData(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return trainapi.RewardEvalOutput{}, err
	}
	if in.Examples > 0 && in.Examples < len(heldout) {
		heldout = heldout[:in.Examples]
	}
	if len(heldout) == 0 {
		return trainapi.RewardEvalOutput{}, train.BadInput(fmt.Errorf("train: prm evaluate %s: no held-out solutions (set data.heldout_examples, data.heldout or data.heldout_share)", in.Checkpoint))
	}
	rows, err := train.StepRows(heldout, in.Batch.MaxSeq, in.Batch.MaxSteps)
	if err != nil {
		return trainapi.RewardEvalOutput{}, err
	}
	m, err := a.Load(ctx, in.Checkpoint, train.LoadOptions{Head: train.HeadRequired})
	if err != nil {
		return trainapi.RewardEvalOutput{}, err
	}
	defer m.Engine.Close()
	scores, err := train.ScoreSteps(m.Engine, rows, prmEvalRows, in.Batch.MaxSteps, in.Batch.MaxSeq, func(done int) {
		activity.RecordHeartbeat(ctx, trainapi.Progress{Step: done, Total: len(rows)})
	})
	if err != nil {
		return trainapi.RewardEvalOutput{}, fmt.Errorf("train: prm evaluate %s: %w", in.Checkpoint, err)
	}
	return trainapi.RewardEvalOutput{Metrics: stepMetrics(rows, scores)}, nil
}

// stepMetrics are PRMEvaluate's metrics of scores (σ of each row's step logits) against the rows' labels.
func stepMetrics(rows []train.StepRow, scores [][]float64) map[string]float64 {
	var n, right, bce, nPos, rightPos, sol float64
	for r, row := range rows {
		minScore, minLabel := 1.0, true
		for s, y := range row.Labels {
			p := scores[r][s]
			minScore, minLabel = min(minScore, p), minLabel && y
			if (p > 0.5) == y {
				right++
			}
			if y {
				nPos++
				if p > 0.5 {
					rightPos++
				}
				bce -= train.LogClamp(p)
			} else {
				bce -= train.LogClamp(1 - p)
			}
			n++
		}
		if (minScore > 0.5) == minLabel {
			sol++
		}
	}
	out := map[string]float64{"heldout_steps": n, "heldout_solutions": float64(len(rows)), "heldout_step_accuracy": right / max(n, 1),
		"heldout_bce": bce / max(n, 1), "heldout_solution_accuracy": sol / max(float64(len(rows)), 1), "heldout_positive": nPos / max(n, 1)}
	if nPos > 0 {
		out["heldout_step_accuracy_correct"] = rightPos / nPos
	}
	if n > nPos {
		out["heldout_step_accuracy_wrong"] = (right - rightPos) / (n - nPos)
	}
	if nPos > 0 && n > nPos {
		// The mean of the two per-label accuracies: calling every step wrong scores 0.5 here
		// whatever the share of wrong steps, while it scores that share in step accuracy.
		out["heldout_balanced_accuracy"] = (out["heldout_step_accuracy_correct"] + out["heldout_step_accuracy_wrong"]) / 2
	}
	return out
}
