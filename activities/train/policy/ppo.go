package policy

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// PPO (Schulman et al. 2017) trains a value-head critic on the policy's trunk. The plan (policy.go)
// loads it with the policy (ppoEngine), reads V_old with π_old before any update, folds
// ppo.kl_coef·(log π_old − log π_ref) into the token rewards and computes GAE(γ, λ) advantages,
// whitened over the iteration's tokens, and returns R = A + V_old (ppoAdvantages); it commits the
// critic beside the policy (writePolicyWithCritic).

// ppoEngine loads checkpoint uri into an engine whose model has a value head: the head of a PPO
// checkpoint (contract.CriticFile) or of a reward model (score.* in model.safetensors), or else a new one
// initialised as RewardInit does (w ~ N(0, HeadInitStd²) from PCG(seed, headStream), b = 0). A LoRA
// adapter checkpoint is merged first. The optimizer state is loaded only when asked, present, and
// the head is not new (a new head has no moments). newHead reports whether the head was made here.
func (a *Activities) ppoEngine(ctx context.Context, uri string, optim contract.Optim, withOptimizer bool, seed uint64) (train.Engine, model.Config, bool, error) {
	ck, err := a.Ckpt.Read(ctx, uri)
	if err != nil {
		return nil, model.Config{}, false, fmt.Errorf("train: read checkpoint %s: %w", uri, err)
	}
	var cfg model.Config
	var raw []byte
	if train.IsAdapterCheckpoint(ck) {
		merged, c, _, err := train.LoadEngine(ctx, a.Ckpt, a.NewEngine, uri, contract.Optim{}, false)
		if err != nil {
			return nil, cfg, false, err
		}
		var buf bytes.Buffer
		err = merged.SaveWeights(&buf)
		merged.Close()
		if err != nil {
			return nil, cfg, false, fmt.Errorf("train: ppo: merge adapters of %s: %w", uri, err)
		}
		cfg, raw, withOptimizer = c, buf.Bytes(), false
	} else {
		hf, err := train.ReadAll(ctx, ck, contract.ConfigFile)
		if err != nil {
			return nil, cfg, false, err
		}
		if cfg, err = model.FromHFConfig(hf); err != nil {
			return nil, cfg, false, train.BadInput(fmt.Errorf("train: %s%s: %w", uri, contract.ConfigFile, err))
		}
		if raw, err = train.ReadAll(ctx, ck, contract.ModelFile); err != nil {
			return nil, cfg, false, err
		}
	}
	f, err := safetensors.Read(bytes.NewReader(raw))
	if err != nil {
		return nil, cfg, false, train.BadInput(fmt.Errorf("train: %s%s: %w", uri, contract.ModelFile, err))
	}
	ts := f.Tensors
	_, hasHead := f.Tensor(train.ScoreWeight)
	if _, ok := ck.Manifest.File(contract.CriticFile); ok && !hasHead {
		craw, err := train.ReadAll(ctx, ck, contract.CriticFile)
		if err != nil {
			return nil, cfg, false, err
		}
		cf, err := safetensors.Read(bytes.NewReader(craw))
		if err != nil {
			return nil, cfg, false, train.BadInput(fmt.Errorf("train: %s%s: %w", uri, contract.CriticFile, err))
		}
		ts, hasHead = append(ts, cf.Tensors...), true
	}
	if !hasHead {
		head, err := train.ValueHeadTensors(cfg.DModel, seed, false)
		if err != nil {
			return nil, cfg, false, err
		}
		ts = append(ts, head...)
	}
	cfg.ValueHead = true
	eng, err := train.LoadTensors(a.NewEngine, train.EngineOptions{Model: cfg, Optim: optim, Seed: seed}, ts, f.Metadata, uri+" with its PPO value head")
	if err != nil {
		return nil, cfg, false, err
	}
	if _, ok := ck.Manifest.File(contract.OptimizerFile); ok && withOptimizer && hasHead {
		rc, err := ck.Open(ctx, contract.OptimizerFile)
		if err != nil {
			eng.Close()
			return nil, cfg, false, err
		}
		err = eng.LoadOptimizer(rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			eng.Close()
			return nil, cfg, false, fmt.Errorf("train: ppo: load %s from %s: %w", contract.OptimizerFile, uri, err)
		}
	}
	return eng, cfg, !hasHead, nil
}

// writePolicyWithCritic commits a PPO policy: config.json and model.safetensors of the causal LM
// alone, its value head in contract.CriticFile, the optimizer state (head included) and state.json.
func writePolicyWithCritic(ctx context.Context, w *ckpt.Writer, eng train.WeightIO, cfg model.Config, st ckpt.State) error {
	lm := cfg
	lm.ValueHead = false
	hf, err := lm.ToHFConfig()
	if err != nil {
		return err
	}
	if err := w.Add(ctx, contract.ConfigFile, train.BytesReader(hf)); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := eng.SaveWeights(&buf); err != nil {
		return fmt.Errorf("write %s: %w", contract.ModelFile, err)
	}
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return fmt.Errorf("write %s: %w", contract.ModelFile, err)
	}
	var policy, critic []safetensors.Tensor
	for _, t := range f.Tensors {
		if strings.HasPrefix(t.Name, "score.") {
			critic = append(critic, t)
		} else {
			policy = append(policy, t)
		}
	}
	if len(critic) != 2 {
		return fmt.Errorf("write %s: the engine saved %d value-head tensors, want %s and %s", contract.CriticFile, len(critic), train.ScoreWeight, train.ScoreBias)
	}
	for _, part := range []struct {
		name string
		ts   []safetensors.Tensor
	}{{contract.ModelFile, policy}, {contract.CriticFile, critic}} {
		var b bytes.Buffer
		if err := safetensors.Write(&b, part.ts, f.Metadata); err != nil {
			return fmt.Errorf("write %s: %w", part.name, err)
		}
		if err := w.Add(ctx, part.name, &b); err != nil {
			return err
		}
	}
	if err := train.Stream(ctx, w, contract.OptimizerFile, eng.SaveOptimizer); err != nil {
		return err
	}
	return w.AddState(ctx, st)
}
