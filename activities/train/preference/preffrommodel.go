package preference

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

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
func (a *Activities) PreferencesFromModel(ctx context.Context, in trainapi.PrefFromModelInput) (trainapi.PrefFromModelOutput, error) {
	op := fmt.Sprintf("train: preferences from %s", in.Checkpoint)
	s := in.Sampling.WithDefaults()
	task, err := tasks.Lookup(in.Data.Task)
	if err != nil {
		return trainapi.PrefFromModelOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
	}
	if s.Samples < 2 || s.Prompts < 1 {
		return trainapi.PrefFromModelOutput{}, train.BadInput(fmt.Errorf("%s: %d prompts × %d samples: want ≥ 1 × ≥ 2", op, s.Prompts, s.Samples))
	}
	seed := in.Seed
	if in.Data.Seed != 0 {
		seed = in.Data.Seed
	}
	hash := train.InputHash(struct {
		C string
		D trainapi.PrefDataSpec
		S trainapi.PrefSampling
		N uint64
	}{in.Checkpoint, in.Data, s, seed})
	trainKey, heldKey := PrefFromModelKey(in.Run, in.Phase, hash, "train"), PrefFromModelKey(in.Run, in.Phase, hash, "heldout")
	statsKey := strings.TrimSuffix(trainKey, ".jsonl") + ".stats.json"
	// The stats object is written last: when it exists, so do the pairs.
	if uri, ok, err := train.ExistingObject(ctx, a.Ckpt, in.Store, statsKey); err != nil {
		return trainapi.PrefFromModelOutput{}, err
	} else if ok {
		b, err := train.ReadObject(ctx, a.Ckpt, uri)
		if err != nil {
			return trainapi.PrefFromModelOutput{}, err
		}
		var out trainapi.PrefFromModelOutput
		if err := json.Unmarshal(b, &out); err != nil {
			return trainapi.PrefFromModelOutput{}, fmt.Errorf("%s: %s: %w", op, uri, err)
		}
		out.Resumed = true
		return out, nil
	}
	// Training prompts come from the training split only: never a held-out prompt.
	trainPrompts, heldPrompts := tasks.Split(task, s.Prompts, in.Data.HeldoutExamples, seed)
	m, err := a.Load(ctx, in.Checkpoint, train.LoadOptions{})
	if err != nil {
		return trainapi.PrefFromModelOutput{}, err
	}
	eng := m.Engine
	defer eng.Close()
	total := len(trainPrompts)
	if !s.SyntheticHeldout {
		total += len(heldPrompts)
	}
	done := 0
	beat := func(n int) {
		done += n
		if activity.IsActivity(ctx) { // also called outside activities (temper data gen --from)
			activity.RecordHeartbeat(ctx, trainapi.Progress{Step: done, Total: total})
		}
	}
	pairs, st, err := samplePairs(ctx, eng, trainPrompts, s, seed, 0, beat)
	if err != nil {
		return trainapi.PrefFromModelOutput{}, fmt.Errorf("%s: %w", op, err)
	}
	if len(pairs) == 0 {
		return trainapi.PrefFromModelOutput{}, train.BadInput(fmt.Errorf("%s: no pairs: %d of %d prompts had only correct samples", op, st.AllCorrect, len(trainPrompts)))
	}
	out := st
	if out.Train, err = writePairs(ctx, a.Ckpt, in.Store, trainKey, pairs); err != nil {
		return trainapi.PrefFromModelOutput{}, err
	}
	if !s.SyntheticHeldout && len(heldPrompts) > 0 {
		held, _, err := samplePairs(ctx, eng, heldPrompts, s, seed, 1, beat)
		if err != nil {
			return trainapi.PrefFromModelOutput{}, fmt.Errorf("%s: held-out: %w", op, err)
		}
		if len(held) == 0 {
			return trainapi.PrefFromModelOutput{}, train.BadInput(fmt.Errorf("%s: no held-out pairs: every sample of the %d held-out prompts is correct (set synthetic_heldout)", op, len(heldPrompts)))
		}
		out.HeldoutPairs = len(held)
		if out.Heldout, err = writePairs(ctx, a.Ckpt, in.Store, heldKey, held); err != nil {
			return trainapi.PrefFromModelOutput{}, err
		}
	}
	b, _ := json.Marshal(out)
	if _, err := train.PutObject(ctx, a.Ckpt, in.Store, statsKey, b); err != nil {
		return trainapi.PrefFromModelOutput{}, err
	}
	return out, nil
}

func writePairs(ctx context.Context, cl *ckpt.Client, root, key string, pairs []tasks.PrefExample) (string, error) {
	var buf bytes.Buffer
	if err := tasks.WritePrefJSONL(&buf, pairs); err != nil {
		return "", err
	}
	return train.PutObject(ctx, cl, root, key, buf.Bytes())
}

// samplePairs samples s.Samples completions per prompt (seeded by seed, split, prompt and sample) and pairs
// a verified-correct completion with a wrong one; it returns the pairs and the stats of the prompts.
func samplePairs(ctx context.Context, eng train.Sampler, prompts []tasks.Example, s trainapi.PrefSampling, seed uint64, split int, beat func(int)) ([]tasks.PrefExample, trainapi.PrefFromModelOutput, error) {
	enc := train.Encoder()
	st := trainapi.PrefFromModelOutput{Prompts: len(prompts)}
	var pairs []tasks.PrefExample
	correct, total := 0, 0
	per := max(1, train.EvalRows/s.Samples)
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
				return nil, st, train.BadInput(err)
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
				text := enc.Tok.Decode(train.StripStop(outs[(i-lo)*s.Samples+k].Tokens))
				total++
				if train.Passes(ex, text) {
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
