package train

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/tasks"
)

// Hugging Face names of the value head (LlamaForSequenceClassification's score layer with one
// label, plus our bias); a checkpoint holding them is a reward model.
const (
	scoreWeight  = "score.weight"         // [1, d]
	scoreBias    = "score.bias"           // [1]
	scoreLogProb = "score.logprob_weight" // [1] (model.Config.RewardLogProb)
)

// HeadInitStd is the standard deviation of a new value head's weights (the bias starts at 0): the
// Hugging Face initializer_range that model.InitWeights uses for every linear layer.
const HeadInitStd = 0.02

// RewardInit commits step 0 of a reward phase: the weights of in.From with a value head added
// when it has none (valueHeadTensors; the trunk and LM head are copied unchanged), or a fresh
// seeded model with a value head. No optimizer state: the
// first chunk starts a fresh one. Retried, it returns the committed step 0.
func (a *Activities) RewardInit(ctx context.Context, in RewardInitInput) (RewardInitOutput, error) {
	newHead := true
	ref, err := a.Ckpt.Save(ctx, in.Store, in.Run, in.Phase, 0, func(w *ckpt.Writer) error {
		var eng Engine
		var cfg model.Config
		if in.From == "" {
			cfg = model.Config(in.Model)
			cfg.ValueHead, cfg.RewardLogProb = true, in.LogProb
			if err := cfg.Validate(); err != nil {
				return badInput(err)
			}
			var err error
			if eng, err = a.NewEngine(EngineOptions{Model: cfg, Seed: in.Seed}); err != nil {
				return err
			}
		} else {
			var err error
			if eng, cfg, newHead, err = a.engineWithHead(ctx, in.From, in.Seed, in.LogProb); err != nil {
				return err
			}
		}
		defer eng.Close()
		st := ckpt.State{Step: 0, ConfigHash: configHash(cfg), Scalars: map[string]float64{"new_head": rewardFlag(newHead)}}
		return writeModel(ctx, w, eng, cfg, st, false)
	})
	if err != nil {
		return RewardInitOutput{}, fmt.Errorf("train: reward init %s/%s from %q: %w", in.Run, in.Phase, in.From, err)
	}
	ck, err := a.Ckpt.Read(ctx, ref.URI)
	if err != nil {
		return RewardInitOutput{}, err
	}
	st, err := ck.ReadState(ctx)
	if err != nil {
		return RewardInitOutput{}, err
	}
	return RewardInitOutput{Checkpoint: ref.URI, NewHead: st.Scalars["new_head"] == 1}, nil
}

// headStream is the PCG stream of value-head initialisation (distinct from model.InitWeights').
const headStream = 0x5c07e

// valueHeadTensors initialises a value head for width d: score.weight ~ N(0, HeadInitStd²) from
// PCG(seed, headStream), score.bias 0, and with logProb the generative term's weight α = 1.
func valueHeadTensors(d int, seed uint64, logProb bool) ([]safetensors.Tensor, error) {
	rng := rand.New(rand.NewPCG(seed, headStream))
	hw := make([]float32, d)
	for i := range hw {
		hw[i] = float32(rng.NormFloat64() * HeadInitStd)
	}
	tw, err := safetensors.FromFloat32(scoreWeight, []int{1, d}, hw, safetensors.F32)
	if err != nil {
		return nil, err
	}
	tb, err := safetensors.FromFloat32(scoreBias, []int{1}, []float32{0}, safetensors.F32)
	if err != nil {
		return nil, err
	}
	if !logProb {
		return []safetensors.Tensor{tw, tb}, nil
	}
	tl, err := safetensors.FromFloat32(scoreLogProb, []int{1}, []float32{1}, safetensors.F32)
	return []safetensors.Tensor{tw, tb, tl}, err
}

// engineWithHead loads checkpoint uri into an engine whose model has a value head, initialising the
// head (with the generative term when logProb) when the checkpoint has none; a checkpoint's
// existing head is kept as it is.
func (a *Activities) engineWithHead(ctx context.Context, uri string, seed uint64, logProb bool) (Engine, model.Config, bool, error) {
	ck, cfg, hasHead, err := readModelConfig(ctx, a.Ckpt, uri)
	if err != nil {
		return nil, cfg, false, err
	}
	if hasHead {
		eng, err := loadInto(ctx, ck, a.NewEngine, cfg, Optim{}, false)
		return eng, cfg, false, err
	}
	raw, err := readAll(ctx, ck, ModelFile)
	if err != nil {
		return nil, cfg, false, err
	}
	f, err := safetensors.Read(bytes.NewReader(raw))
	if err != nil {
		return nil, cfg, false, badInput(fmt.Errorf("train: %s%s: %w", uri, ModelFile, err))
	}
	head, err := valueHeadTensors(cfg.DModel, seed, logProb)
	if err != nil {
		return nil, cfg, false, err
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, append(f.Tensors, head...), f.Metadata); err != nil {
		return nil, cfg, false, fmt.Errorf("train: add value head to %s: %w", uri, err)
	}
	cfg.ValueHead, cfg.RewardLogProb = true, logProb
	eng, err := a.NewEngine(EngineOptions{Model: cfg, Seed: seed})
	if err != nil {
		return nil, cfg, false, err
	}
	if err := eng.LoadWeights(&buf); err != nil {
		eng.Close()
		return nil, cfg, false, badInput(fmt.Errorf("train: load %s with a new value head: %w", uri, err))
	}
	return eng, cfg, true, nil
}

// readModelConfig reads a checkpoint's config.json and tells from its weights' header whether it
// has a value head (config.json describes the causal LM only, as tpu.ReadModelConfig reads it).
func readModelConfig(ctx context.Context, cl *ckpt.Client, uri string) (*ckpt.Checkpoint, model.Config, bool, error) {
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return nil, model.Config{}, false, fmt.Errorf("train: read checkpoint %s: %w", uri, err)
	}
	raw, err := readAll(ctx, ck, ConfigFile)
	if err != nil {
		return nil, model.Config{}, false, err
	}
	cfg, err := model.FromHFConfig(raw)
	if err != nil {
		return nil, cfg, false, badInput(fmt.Errorf("train: %s%s: %w", uri, ConfigFile, err))
	}
	rc, err := ck.Open(ctx, ModelFile)
	if err != nil {
		return nil, cfg, false, err
	}
	defer rc.Close()
	h, err := safetensors.ReadHeader(rc)
	if err != nil {
		return nil, cfg, false, badInput(fmt.Errorf("train: %s%s: %w", uri, ModelFile, err))
	}
	cfg = cfg.WithHeads(func(name string) bool { _, ok := h.Entry(name); return ok })
	return ck, cfg, cfg.ValueHead, nil
}

// loadInto builds an engine for cfg and loads a checkpoint's weights (and optimizer state when
// asked and present): the one loader under LoadEngine, LoadRewardEngine and the value-head paths.
func loadInto(ctx context.Context, ck *ckpt.Checkpoint, newEngine NewEngine, cfg model.Config, optim Optim, withOptimizer bool) (Engine, error) {
	eng, err := newEngine(EngineOptions{Model: cfg, Optim: optim})
	if err != nil {
		return nil, err
	}
	if err := loadFile(ctx, ck, ModelFile, eng.LoadWeights); err != nil {
		eng.Close()
		return nil, err
	}
	if _, ok := ck.Manifest.File(OptimizerFile); ok && withOptimizer {
		if err := loadFile(ctx, ck, OptimizerFile, eng.LoadOptimizer); err != nil {
			eng.Close()
			return nil, err
		}
	}
	return eng, nil
}

// LoadRewardEngine builds an engine holding a reward model checkpoint (one with a value head:
// score.weight); a checkpoint without one is a non-retryable error. The reward role's "critic"
// verifier uses it too.
func LoadRewardEngine(ctx context.Context, cl *ckpt.Client, newEngine NewEngine, uri string, optim Optim, withOptimizer bool) (Engine, model.Config, error) {
	ck, cfg, hasHead, err := readModelConfig(ctx, cl, uri)
	if err != nil {
		return nil, cfg, err
	}
	if !hasHead {
		return nil, cfg, badInput(fmt.Errorf("train: %s is not a reward model: its weights have no value head (%s); train one with a reward phase", uri, scoreWeight))
	}
	eng, err := loadInto(ctx, ck, newEngine, cfg, optim, withOptimizer)
	return eng, cfg, err
}

// RewardChunk trains in.Steps steps of the Bradley–Terry objective from in.From (runChunk does the
// rest); its metrics are objective.BTMetrics' chunk means, and pairs / pairs_per_s.
func (a *Activities) RewardChunk(ctx context.Context, in RewardChunkInput) (ChunkOutput, error) {
	op := fmt.Sprintf("train: reward chunk %s/%s", in.Run, in.Phase)
	if err := in.Batch.Validate(); err != nil {
		return ChunkOutput{}, badInput(fmt.Errorf("%s: %w", op, err))
	}
	if err := in.Loss.Validate(); err != nil {
		return ChunkOutput{}, badInput(fmt.Errorf("%s: loss.%w", op, err))
	}
	return runChunk(ctx, a, in.ChunkHead, op, func() (*chunkObjective[[]int], error) {
		trainPairs, _, err := rewardPairs(ctx, a.Ckpt, in.Data, in.Cursor.Seed)
		if err != nil {
			return nil, err
		}
		enc, err := encodePairs(trainPairs, in.Batch.MaxSeq)
		if err != nil {
			return nil, err
		}
		eng, cfg, err := LoadRewardEngine(ctx, a.Ckpt, a.NewEngine, in.From, in.Optim, !in.FreshOptimizer)
		if err != nil {
			return nil, err
		}
		obj := objective.BradleyTerry(in.Loss)
		return &chunkObjective[[]int]{eng: eng, cfg: cfg, unit: "pairs",
			next: func(cur Cursor) ([]int, Cursor, error) {
				idx, next := nextRows(len(enc), in.Batch.Rows, cur)
				return idx, next, nil
			},
			step: func(idx []int, lr float32) (stepResult, error) {
				m, err := eng.StepObjective(obj, pairInputs(enc, idx, in.Batch.Rows, in.Batch.MaxSeq), lr)
				return objectiveStep(obj, m, len(idx)), err
			},
			write: func(ctx context.Context, w *ckpt.Writer, st ckpt.State) error {
				return writeModel(ctx, w, eng, cfg, st, true)
			},
		}, nil
	})
}

// rewardEvalRows is how many held-out pairs go through the engine at once.
const rewardEvalRows = 64

// RewardEvaluate measures a reward model on held-out pairs: heldout_pair_accuracy (the fraction
// with r_chosen > r_rejected; the acceptance metric), heldout_bt_loss, heldout_margin, the mean
// rewards, heldout_pairs, and for arithmetic pairs the accuracy per kind of mistake
// (heldout_pair_accuracy_<kind>, see tasks.MistakeKind).
func (a *Activities) RewardEvaluate(ctx context.Context, in RewardEvalInput) (RewardEvalOutput, error) {
	if in.Batch.MaxSeq == 0 {
		in.Batch.MaxSeq = 64
	}
	_, heldout, err := rewardPairs(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return RewardEvalOutput{}, err
	}
	if in.Pairs > 0 && in.Pairs < len(heldout) {
		heldout = heldout[:in.Pairs]
	}
	if len(heldout) == 0 {
		return RewardEvalOutput{}, badInput(fmt.Errorf("train: reward evaluate %s: no held-out pairs (set data.heldout_pairs or data.heldout)", in.Checkpoint))
	}
	enc, err := encodePairs(heldout, in.Batch.MaxSeq)
	if err != nil {
		return RewardEvalOutput{}, err
	}
	eng, _, err := LoadRewardEngine(ctx, a.Ckpt, a.NewEngine, in.Checkpoint, Optim{}, false)
	if err != nil {
		return RewardEvalOutput{}, err
	}
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
			m, err := eng.EvalObjective(obj, pairInputs(enc, idx[lo:hi], rewardEvalRows, in.Batch.MaxSeq))
			if err != nil {
				return RewardEvalOutput{}, fmt.Errorf("train: reward evaluate %s: %w", in.Checkpoint, err)
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
			activity.RecordHeartbeat(ctx, Progress{Step: done, Total: len(enc)})
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
	return RewardEvalOutput{Metrics: metrics}, nil
}
