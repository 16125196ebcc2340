package rewardmodel

import (
	"context"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/tasks"
)

// rewardPairs returns the train and held-out preference pairs of spec; seed is used when spec.Seed
// is 0.
func rewardPairs(ctx context.Context, cl *ckpt.Client, spec trainapi.RewardData, seed uint64) (trainEx, heldout []tasks.PrefExample, err error) {
	return splitData(spec, spec.Task, spec.Seed, seed, func(t tasks.Task, seed uint64) ([]tasks.PrefExample, []tasks.PrefExample, error) {
		return tasks.PrefSplit(t, spec.TrainPairs, spec.HeldoutPairs, seed)
	}, func() ([]tasks.PrefExample, []tasks.PrefExample, error) {
		if trainEx, err = readPairsJSONL(ctx, cl, spec.Train); err != nil {
			return nil, nil, err
		}
		if spec.Heldout != "" {
			if heldout, err = readPairsJSONL(ctx, cl, spec.Heldout); err != nil {
				return nil, nil, err
			}
		}
		return trainEx, heldout, nil
	})
}

// splitData is the train and held-out examples of a data spec (spec validates it; task and its
// seed are its fields): a built-in task's, split with the spec's seed or else seed (fromTask), or
// those of its files (fromFiles). A spec or task that does not validate is a non-retryable error.
func splitData[E any](spec interface{ Validate() error }, task string, specSeed, seed uint64,
	fromTask func(t tasks.Task, seed uint64) ([]E, []E, error), fromFiles func() ([]E, []E, error)) ([]E, []E, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, train.BadInput(err)
	}
	if specSeed != 0 {
		seed = specSeed
	}
	if task == "" {
		return fromFiles()
	}
	t, err := tasks.Lookup(task)
	if err != nil {
		return nil, nil, train.BadInput(err)
	}
	trainEx, heldout, err := fromTask(t, seed)
	if err != nil {
		return nil, nil, train.BadInput(err)
	}
	return trainEx, heldout, nil
}

// readPairsJSONL reads preference pairs from a store URI; unpaired lines are paired up by prompt
// (tasks.PairUp). A malformed line is a non-retryable error naming the file and line.
func readPairsJSONL(ctx context.Context, cl *ckpt.Client, uri string) ([]tasks.PrefExample, error) {
	exs, err := train.ReadLines(ctx, cl, uri, tasks.ReadPrefAll)
	if err != nil {
		return nil, err
	}
	pairs := tasks.PairUp(exs)
	if len(pairs) == 0 {
		return nil, train.BadInput(fmt.Errorf("train: %s has no preference pairs", uri))
	}
	return pairs, nil
}

// encodedPair is a pair as token ids: [BOS] prompt completion EOS for each side.
type encodedPair struct {
	chosen, rejected         []int
	chosenLoss, rejectedLoss []bool // each side's completion tokens and EOS
	kind                     string // tasks.MistakeKind for arithmetic pairs
}

// encodePairs tokenizes pairs with the built-in template; a side longer than maxSeq tokens is a
// non-retryable error naming the pair.
func encodePairs(pairs []tasks.PrefExample, maxSeq int) ([]encodedPair, error) {
	enc := train.Encoder()
	out := make([]encodedPair, len(pairs))
	for i, p := range pairs {
		side := func(completion string) (data.Encoded, error) {
			e, err := enc.Encode(tasks.Example{Prompt: p.Prompt, Completion: completion})
			if err != nil {
				return e, train.BadInput(fmt.Errorf("train: encode pair %d (%s): %w", i, p.ID, err))
			}
			if len(e.IDs) > maxSeq {
				return e, train.BadInput(fmt.Errorf("train: pair %d (%s) has %d tokens, batch.max_seq is %d: raise max_seq or shorten the data", i, p.ID, len(e.IDs), maxSeq))
			}
			return e, nil
		}
		c, err := side(p.Chosen)
		if err != nil {
			return nil, err
		}
		r, err := side(p.Rejected)
		if err != nil {
			return nil, err
		}
		out[i].chosen, out[i].chosenLoss, out[i].rejected, out[i].rejectedLoss = c.IDs, c.Loss, r.IDs, r.Loss
		out[i].kind = ""
		if p.Answer != "" {
			out[i].kind = tasks.MistakeKind(p.Prompt, p.Answer, p.Rejected)
		}
	}
	return out, nil
}

// pairBatch is objective.BradleyTerry's batch of the pairs idx, padded to rows rows (padding rows
// have weight 0) and to a common sequence length.
func pairBatch(enc []encodedPair, idx []int, rows, maxSeq int) objective.BTBatch {
	longest := 1
	for _, i := range idx {
		longest = max(longest, len(enc[i].chosen), len(enc[i].rejected))
	}
	seq := train.PadSeq(longest, maxSeq)
	side := func(get func(encodedPair) ([]int, []bool)) objective.Sequences {
		seqs, completion := make([][]int, len(idx)), make([][]bool, len(idx))
		for r, i := range idx {
			seqs[r], completion[r] = get(enc[i])
		}
		return train.SequenceInputs(seqs, completion, rows, seq)
	}
	b := objective.BTBatch{
		Chosen:   side(func(p encodedPair) ([]int, []bool) { return p.chosen, p.chosenLoss }),
		Rejected: side(func(p encodedPair) ([]int, []bool) { return p.rejected, p.rejectedLoss }),
		Weight:   make([]float32, rows),
	}
	for r := range idx {
		b.Weight[r] = 1
	}
	return b
}
