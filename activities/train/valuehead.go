package train

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// Hugging Face names of the value head (LlamaForSequenceClassification's score layer with one
// label, plus our bias); a checkpoint holding them is a reward model.
const (
	ScoreWeight  = "score.weight"         // [1, d]
	ScoreBias    = "score.bias"           // [1]
	ScoreLogProb = "score.logprob_weight" // [1] (model.Config.RewardLogProb)
)

// HeadInitStd is the standard deviation of a new value head's weights (the bias starts at 0): the
// Hugging Face initializer_range that model.InitWeights uses for every linear layer.
const HeadInitStd = 0.02

// headStream is the PCG stream of value-head initialisation (distinct from model.InitWeights').
const headStream = 0x5c07e

// ValueHeadTensors initialises a value head for width d: score.weight ~ N(0, HeadInitStd²) from
// PCG(seed, headStream), score.bias 0, and with logProb the generative term's weight α = 1.
func ValueHeadTensors(d int, seed uint64, logProb bool) ([]safetensors.Tensor, error) {
	rng := rand.New(rand.NewPCG(seed, headStream))
	hw := make([]float32, d)
	for i := range hw {
		hw[i] = float32(rng.NormFloat64() * HeadInitStd)
	}
	tw, err := safetensors.FromFloat32(ScoreWeight, []int{1, d}, hw, safetensors.F32)
	if err != nil {
		return nil, err
	}
	tb, err := safetensors.FromFloat32(ScoreBias, []int{1}, []float32{0}, safetensors.F32)
	if err != nil {
		return nil, err
	}
	if !logProb {
		return []safetensors.Tensor{tw, tb}, nil
	}
	tl, err := safetensors.FromFloat32(ScoreLogProb, []int{1}, []float32{1}, safetensors.F32)
	return []safetensors.Tensor{tw, tb, tl}, err
}

// ReadModelConfig reads a checkpoint's config.json and tells from its weights' header whether it
// has a value head (config.json describes the causal LM only, as tpu.ReadModelConfig reads it).
func ReadModelConfig(ctx context.Context, cl *ckpt.Client, uri string) (*ckpt.Checkpoint, model.Config, bool, error) {
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return nil, model.Config{}, false, fmt.Errorf("train: read checkpoint %s: %w", uri, err)
	}
	raw, err := ReadAll(ctx, ck, contract.ConfigFile)
	if err != nil {
		return nil, model.Config{}, false, err
	}
	cfg, err := model.FromHFConfig(raw)
	if err != nil {
		return nil, cfg, false, BadInput(fmt.Errorf("train: %s%s: %w", uri, contract.ConfigFile, err))
	}
	rc, err := ck.Open(ctx, contract.ModelFile)
	if err != nil {
		return nil, cfg, false, err
	}
	defer rc.Close()
	h, err := safetensors.ReadHeader(rc)
	if err != nil {
		return nil, cfg, false, BadInput(fmt.Errorf("train: %s%s: %w", uri, contract.ModelFile, err))
	}
	cfg = cfg.WithHeads(func(name string) bool { _, ok := h.Entry(name); return ok })
	return ck, cfg, cfg.ValueHead, nil
}

// LoadInto builds an engine for cfg and loads a checkpoint's weights (and optimizer state when
// asked and present): the one loader under LoadEngine, LoadRewardEngine and the value-head paths.
func LoadInto(ctx context.Context, ck *ckpt.Checkpoint, newEngine NewEngine, cfg model.Config, optim contract.Optim, withOptimizer bool) (Engine, error) {
	eng, err := newEngine(EngineOptions{Model: cfg, Optim: optim})
	if err != nil {
		return nil, err
	}
	if err := LoadFile(ctx, ck, contract.ModelFile, eng.LoadWeights); err != nil {
		eng.Close()
		return nil, err
	}
	if _, ok := ck.Manifest.File(contract.OptimizerFile); ok && withOptimizer {
		if err := LoadFile(ctx, ck, contract.OptimizerFile, eng.LoadOptimizer); err != nil {
			eng.Close()
			return nil, err
		}
	}
	return eng, nil
}

// LoadRewardEngine builds an engine holding a reward model checkpoint (one with a value head:
// score.weight); a checkpoint without one is a non-retryable error. The reward role's "critic"
// verifier uses it too.
func LoadRewardEngine(ctx context.Context, cl *ckpt.Client, newEngine NewEngine, uri string, optim contract.Optim, withOptimizer bool) (Engine, model.Config, error) {
	ck, cfg, hasHead, err := ReadModelConfig(ctx, cl, uri)
	if err != nil {
		return nil, cfg, err
	}
	if !hasHead {
		return nil, cfg, BadInput(fmt.Errorf("train: %s is not a reward model: its weights have no value head (%s); train one with a reward phase", uri, ScoreWeight))
	}
	eng, err := LoadInto(ctx, ck, newEngine, cfg, optim, withOptimizer)
	return eng, cfg, err
}

// LoadTensors builds an engine with opts and loads ts (file metadata meta) as its weights: how a
// checkpoint's weights are loaded together with a value head that is not in its model file (a new
// one, or PPO's critic file). what names the weights in errors.
func LoadTensors(newEngine NewEngine, opts EngineOptions, ts []safetensors.Tensor, meta map[string]string, what string) (Engine, error) {
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, meta); err != nil {
		return nil, fmt.Errorf("train: weights of %s: %w", what, err)
	}
	eng, err := newEngine(opts)
	if err != nil {
		return nil, err
	}
	if err := eng.LoadWeights(&buf); err != nil {
		eng.Close()
		return nil, BadInput(fmt.Errorf("train: load %s: %w", what, err))
	}
	return eng, nil
}
