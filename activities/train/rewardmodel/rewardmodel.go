package rewardmodel

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/tasks"
)

// Activities are the reward-model activities; they share the trainer's dependencies (store client,
// engine factory) and kernel (chunk runner, engine loaders, data readers) with the other families.
type Activities struct {
	*train.Activities
	// NewVision builds the engines of vision reward models (WithVision); nil: this worker cannot
	// run them.
	NewVision NewVisionEngine
}

// Register registers the reward-model activities under their contract names on the trainer queue's worker.
func Register(r train.Registrar, deps *train.Activities, opts ...Option) {
	a := &Activities{Activities: deps}
	for _, o := range opts {
		o(a)
	}
	r.RegisterActivityWithOptions(a.RewardInit, activity.RegisterOptions{Name: trainapi.RewardInitName})
	r.RegisterActivityWithOptions(a.RewardChunk, activity.RegisterOptions{Name: trainapi.RewardChunkName})
	r.RegisterActivityWithOptions(a.RewardEvaluate, activity.RegisterOptions{Name: trainapi.RewardEvaluateName})
	r.RegisterActivityWithOptions(a.PRMChunk, activity.RegisterOptions{Name: trainapi.PRMChunkName})
	r.RegisterActivityWithOptions(a.PRMEvaluate, activity.RegisterOptions{Name: trainapi.PRMEvaluateName})
}

// RewardInit commits step 0 of a reward phase: the weights of in.From with a value head added
// when it has none (train.HeadAdded; the trunk and LM head are copied unchanged), or a fresh
// seeded model with a value head. No optimizer state: the
// first chunk starts a fresh one. Retried, it returns the committed step 0.
func (a *Activities) RewardInit(ctx context.Context, in trainapi.RewardInitInput) (trainapi.RewardInitOutput, error) {
	if in.Vision != nil {
		return a.visionInit(ctx, in)
	}
	newHead := true
	ref, err := a.Ckpt.Save(ctx, in.Store, in.Run, in.Phase, 0, func(w *ckpt.Writer) error {
		var m *train.Loaded
		if in.From == "" {
			cfg := model.Config(in.Model)
			cfg.ValueHead, cfg.RewardLogProb = true, in.LogProb
			if err := cfg.Validate(); err != nil {
				return train.BadInput(err)
			}
			eng, err := a.NewEngine(train.EngineOptions{Model: cfg, Seed: in.Seed})
			if err != nil {
				return err
			}
			m = &train.Loaded{Engine: eng, Config: cfg}
		} else {
			var err error
			if m, err = a.Load(ctx, in.From, train.LoadOptions{Head: train.HeadAdded, HeadSeed: in.Seed, HeadLogProb: in.LogProb}); err != nil {
				return err
			}
			newHead = m.NewHead
		}
		defer m.Close()
		st := ckpt.State{Step: 0, ConfigHash: train.ConfigHash(m.Config), Scalars: map[string]float64{"new_head": train.RewardFlag(newHead)}}
		return train.WriteModel(ctx, w, m, st, false)
	})
	if err != nil {
		return trainapi.RewardInitOutput{}, fmt.Errorf("train: reward init %s/%s from %q: %w", in.Run, in.Phase, in.From, err)
	}
	ck, err := a.Ckpt.Read(ctx, ref.URI)
	if err != nil {
		return trainapi.RewardInitOutput{}, err
	}
	st, err := ck.ReadState(ctx)
	if err != nil {
		return trainapi.RewardInitOutput{}, err
	}
	return trainapi.RewardInitOutput{Checkpoint: ref.URI, NewHead: st.Scalars["new_head"] == 1}, nil
}

// RewardChunk trains in.Steps steps of the Bradley–Terry objective from in.From (train.RunChunk does the
// rest); its metrics are objective.BTMetrics' chunk means, and pairs / pairs_per_s.
func (a *Activities) RewardChunk(ctx context.Context, in trainapi.RewardChunkInput) (trainapi.ChunkOutput, error) {
	op := fmt.Sprintf("train: reward chunk %s/%s", in.Run, in.Phase)
	if err := in.Batch.Validate(); err != nil {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
	}
	if err := in.Loss.Validate(); err != nil {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: loss.%w", op, err))
	}
	if vis, err := IsVision(ctx, a.Ckpt, in.From); err != nil {
		return trainapi.ChunkOutput{}, err
	} else if vis {
		return a.visionChunk(ctx, in, op)
	}
	return train.RunChunk(ctx, a.Activities, in.ChunkHead, op, func() (*train.ChunkObjective[[]int], error) {
		trainPairs, _, err := rewardPairs(ctx, a.Ckpt, in.Data, in.Cursor.Seed)
		if err != nil {
			return nil, err
		}
		enc, err := encodePairs(trainPairs, in.Batch.MaxSeq)
		if err != nil {
			return nil, err
		}
		m, err := a.Load(ctx, in.From, train.LoadOptions{Optim: in.Optim, Optimizer: !in.FreshOptimizer, Head: train.HeadRequired})
		if err != nil {
			return nil, err
		}
		return train.RowsObjective(m, objective.BradleyTerry(in.Loss), "pairs", len(enc), in.Batch.Rows, func(idx []int) (objective.Batch, error) {
			return pairBatch(enc, idx, in.Batch.Rows, in.Batch.MaxSeq), nil
		}), nil
	})
}

// rewardEvalRows is how many held-out pairs go through the engine at once.
const rewardEvalRows = 64

// RewardEvaluate measures a reward model on held-out pairs: heldout_pair_accuracy (the fraction
// with r_chosen > r_rejected; the acceptance metric), heldout_bt_loss, heldout_margin, the mean
// rewards, heldout_pairs, and for arithmetic pairs the accuracy per kind of mistake
// (heldout_pair_accuracy_<kind>, see tasks.MistakeKind).
func (a *Activities) RewardEvaluate(ctx context.Context, in trainapi.RewardEvalInput) (trainapi.RewardEvalOutput, error) {
	if vis, err := IsVision(ctx, a.Ckpt, in.Checkpoint); err != nil {
		return trainapi.RewardEvalOutput{}, err
	} else if vis {
		return a.visionEvaluate(ctx, in)
	}
	if in.Batch.MaxSeq == 0 {
		in.Batch.MaxSeq = 64
	}
	_, heldout, err := rewardPairs(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return trainapi.RewardEvalOutput{}, err
	}
	if in.Pairs > 0 && in.Pairs < len(heldout) {
		heldout = heldout[:in.Pairs]
	}
	if len(heldout) == 0 {
		return trainapi.RewardEvalOutput{}, train.BadInput(fmt.Errorf("train: reward evaluate %s: no held-out pairs (set data.heldout_pairs or data.heldout)", in.Checkpoint))
	}
	enc, err := encodePairs(heldout, in.Batch.MaxSeq)
	if err != nil {
		return trainapi.RewardEvalOutput{}, err
	}
	m, err := a.Load(ctx, in.Checkpoint, train.LoadOptions{Head: train.HeadRequired})
	if err != nil {
		return trainapi.RewardEvalOutput{}, err
	}
	eng := m.Engine
	defer eng.Close()
	// Pairs are evaluated grouped by kind of mistake, so one pass gives every per-kind accuracy.
	groups := map[string][]int{}
	for i, p := range enc {
		groups[p.kind] = append(groups[p.kind], i)
	}
	obj := objective.BradleyTerry(in.Loss)
	sums := map[string]float64{}
	total, done := 0.0, 0
	for _, kind := range append(append([]string(nil), tasks.MistakeKinds...), "") {
		idx := groups[kind]
		var right, n float64
		for lo := 0; lo < len(idx); lo += rewardEvalRows {
			hi := min(lo+rewardEvalRows, len(idx))
			m, err := eng.EvalObjective(obj, pairBatch(enc, idx[lo:hi], rewardEvalRows, in.Batch.MaxSeq))
			if err != nil {
				return trainapi.RewardEvalOutput{}, fmt.Errorf("train: reward evaluate %s: %w", in.Checkpoint, err)
			}
			k := float64(hi - lo)
			for _, name := range objective.BTMetrics {
				if name != "pairs" && (name != "lm_loss" || in.Loss.LMCoef > 0) {
					sums[name] += float64(m[name]) * k
				}
			}
			right += float64(m["accuracy"]) * k
			n += k
			done += hi - lo
			activity.RecordHeartbeat(ctx, trainapi.Progress{Step: done, Total: len(enc)})
		}
		if n > 0 && kind != "" && kind != tasks.MistakeNotArith {
			sums["accuracy_"+kind] = right / n
		}
		total += n
	}
	metrics := map[string]float64{"heldout_pairs": total}
	for name, v := range sums {
		key := "heldout_" + name
		switch {
		case strings.HasPrefix(name, "accuracy_"):
			metrics["heldout_pair_"+name] = v
			continue
		case name == "accuracy":
			key = "heldout_pair_accuracy"
		}
		metrics[key] = v / total
	}
	return trainapi.RewardEvalOutput{Metrics: metrics}, nil
}
