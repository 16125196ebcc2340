package train

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// LoRA checkpoints. A phase configured with a model.LoRA trains low-rank adapters on a frozen
// base; each of its checkpoints holds
//
//	adapter_config.json        PEFT's LoraConfig; base_model_name_or_path = the base checkpoint's URI
//	adapter_model.safetensors  the adapters alone, PEFT names (base_model.model.<module>.lora_A.weight)
//	optimizer.safetensors      AdamW state of the adapters
//	state.json                 as for any checkpoint
//
// and never a copy of the base weights (nor config.json: the base's is read). Loading one is "base
// checkpoint + adapters": LoadTrainEngine keeps them apart to go on training the adapters alone,
// LoadAdapterEngine (what LoadEngine does for every other role) folds them into one plain model.
// Every chunk of the phase names the same base, so the base must outlive the phase's checkpoints:
// it must be another phase's committed checkpoint (never the LoRA phase's own step 0, which its
// Retain would delete); `temper lora merge` turns adapters into a standalone model directory.

// Files of a LoRA checkpoint.
const (
	AdapterFile       = "adapter_model.safetensors"
	AdapterConfigFile = "adapter_config.json"
)

// Adapters says an engine trains LoRA adapters on top of the plain checkpoint Base. An engine built
// with EngineOptions.LoRA trains only the adapters; its Caps().Adapters saves/loads them alone (PEFT
// adapter_model.safetensors), asked for once when it is loaded and kept here for the commit, while
// SaveWeights/LoadWeights still move the base weights and SaveOptimizer/LoadOptimizer the adapters'
// optimizer state.
type Adapters struct {
	LoRA model.LoRA
	Base string
	io   AdapterIO
}

// adapterIO is the adapters' capability of an engine built with EngineOptions.LoRA; what names the
// checkpoint in the error.
func adapterIO(eng Engine, what string) (AdapterIO, error) {
	if a := eng.Caps().Adapters; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("train: %s: the engine (%T) cannot hold LoRA adapters", what, eng)
}

// IsAdapterCheckpoint reports whether ck holds LoRA adapters rather than full weights.
func IsAdapterCheckpoint(ck *ckpt.Checkpoint) bool {
	_, ok := ck.Manifest.File(AdapterConfigFile)
	return ok
}

// readAdapterConfig reads ck's adapter_config.json: the adapters' config and their base's URI.
func readAdapterConfig(ctx context.Context, ck *ckpt.Checkpoint) (model.LoRA, string, error) {
	raw, err := ReadAll(ctx, ck, AdapterConfigFile)
	if err != nil {
		return model.LoRA{}, "", err
	}
	l, base, err := model.ParsePEFTConfig(raw)
	if err != nil {
		return model.LoRA{}, "", BadInput(fmt.Errorf("train: %s%s: %w", ck.Ref.URI, AdapterConfigFile, err))
	}
	if base == "" {
		return model.LoRA{}, "", BadInput(fmt.Errorf("train: %s%s: base_model_name_or_path is empty", ck.Ref.URI, AdapterConfigFile))
	}
	return l, base, nil
}

// readBase reads the plain base checkpoint an adapter checkpoint names: its model config and the
// opened checkpoint.
func readBase(ctx context.Context, cl *ckpt.Client, base, from string) (model.Config, *ckpt.Checkpoint, error) {
	bck, err := cl.Read(ctx, base)
	if err != nil {
		return model.Config{}, nil, fmt.Errorf("train: read base checkpoint %s of %s: %w", base, from, err)
	}
	if IsAdapterCheckpoint(bck) {
		return model.Config{}, nil, BadInput(fmt.Errorf("train: base %s of %s holds adapters itself; stacked adapters are not supported (merge it first: temper lora merge)", base, from))
	}
	raw, err := ReadAll(ctx, bck, contract.ConfigFile)
	if err != nil {
		return model.Config{}, nil, err
	}
	cfg, err := model.FromHFConfig(raw)
	if err != nil {
		return model.Config{}, nil, BadInput(fmt.Errorf("train: %s%s: %w", base, contract.ConfigFile, err))
	}
	return cfg, bck, nil
}

// LoadFile streams one checkpoint file into fn, surfacing a checksum mismatch found at the end.
func LoadFile(ctx context.Context, ck *ckpt.Checkpoint, name string, fn func(io.Reader) error) error {
	rc, err := ck.Open(ctx, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := fn(rc); err != nil {
		return fmt.Errorf("train: load %s from %s: %w", name, ck.Ref.URI, err)
	}
	return rc.Close()
}

// LoadAdapterEngine builds a plain engine holding an adapter checkpoint's merged model: its base
// checkpoint's weights with the adapters folded in (W + alpha/rank·A·B, host-side; equal to base +
// adapters to ~1e-7). It has LoadEngine's signature, so LoadEngine hands adapter checkpoints to it
// and every role (evaluation, rollouts, reference and policy models) reads them as one plain model
// that it may also train and save as a full checkpoint. The adapters' optimizer state does not
// apply to the merged weights and is never loaded (withOptimizer is ignored). Only LoadTrainEngine
// with a LoRA config keeps the adapters separate.
func LoadAdapterEngine(ctx context.Context, cl *ckpt.Client, newEngine NewEngine, ck *ckpt.Checkpoint, optim contract.Optim, _ bool) (Engine, model.Config, *ckpt.Checkpoint, error) {
	cfg, merged, err := mergeAdapterCheckpoint(ctx, cl, ck)
	if err != nil {
		return nil, cfg, nil, err
	}
	var buf bytes.Buffer
	if err := writeHF(&buf, cfg, merged); err != nil {
		return nil, cfg, nil, fmt.Errorf("train: merge %s: %w", ck.Ref.URI, err)
	}
	eng, err := newEngine(EngineOptions{Model: cfg, Optim: optim})
	if err != nil {
		return nil, cfg, nil, err
	}
	if err := eng.LoadWeights(&buf); err != nil {
		eng.Close()
		return nil, cfg, nil, fmt.Errorf("train: load merged %s: %w", ck.Ref.URI, err)
	}
	return eng, cfg, ck, nil
}

// loadAdapterCheckpoint loads base + adapters of ck into an adapter engine for training with want
// (a phase's config): the checkpoint's adapters must have the same modules, rank and scale; want's
// dropout and seed are the ones used.
func loadAdapterCheckpoint(ctx context.Context, cl *ckpt.Client, newEngine NewEngine, ck *ckpt.Checkpoint, optim contract.Optim, want model.LoRA, withOptimizer bool) (Engine, model.Config, *Adapters, error) {
	l, base, err := readAdapterConfig(ctx, ck)
	if err != nil {
		return nil, model.Config{}, nil, err
	}
	cfg, bck, err := readBase(ctx, cl, base, ck.Ref.URI)
	if err != nil {
		return nil, model.Config{}, nil, err
	}
	if !model.SameAdapters(cfg, l, want) {
		return nil, cfg, nil, BadInput(fmt.Errorf("train: %s holds adapters %+v, the phase asks for %+v: start the phase from the base %s or keep the same rank, alpha and targets",
			ck.Ref.URI, l, want.WithDefaults(), base))
	}
	l = want.WithDefaults()
	eng, err := newEngine(EngineOptions{Model: cfg, Optim: optim, LoRA: &l})
	if err != nil {
		return nil, cfg, nil, err
	}
	ae, err := adapterIO(eng, "load "+ck.Ref.URI)
	if err != nil {
		eng.Close()
		return nil, cfg, nil, err
	}
	if err := LoadFile(ctx, bck, contract.ModelFile, eng.LoadWeights); err != nil {
		eng.Close()
		return nil, cfg, nil, err
	}
	if err := LoadFile(ctx, ck, AdapterFile, ae.LoadAdapters); err != nil {
		eng.Close()
		return nil, cfg, nil, err
	}
	if withOptimizer {
		if _, ok := ck.Manifest.File(contract.OptimizerFile); ok {
			if err := LoadFile(ctx, ck, contract.OptimizerFile, eng.LoadOptimizer); err != nil {
				eng.Close()
				return nil, cfg, nil, err
			}
		}
	}
	return eng, cfg, &Adapters{LoRA: l, Base: base, io: ae}, nil
}

// LoadTrainEngine is what a training chunk loads from checkpoint uri:
//
//   - lora nil, uri plain: the full model (LoadEngine); the result's *Adapters is nil.
//   - lora set, uri plain: uri becomes the frozen base; fresh adapters (A seeded by lora.Seed, B = 0,
//     so step 0 computes exactly the base) and a fresh optimizer (uri's belongs to the full model).
//   - lora set, uri an adapter checkpoint: its base + its adapters (+ optimizer when asked), which
//     must match lora's modules, rank and scale; training continues them.
//   - lora nil, uri an adapter checkpoint: the merged model (W + alpha/rank·B·A) as a plain model
//     with a fresh optimizer: full fine-tuning continues from base + adapters.
//
// Commit with WriteTrained, passing the *Adapters returned here.
func LoadTrainEngine(ctx context.Context, cl *ckpt.Client, newEngine NewEngine, uri string, optim contract.Optim, lora *model.LoRA, withOptimizer bool) (Engine, model.Config, *Adapters, error) {
	if lora != nil {
		if err := lora.Validate(); err != nil {
			return nil, model.Config{}, nil, BadInput(fmt.Errorf("train: lora: %w", err))
		}
	}
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return nil, model.Config{}, nil, fmt.Errorf("train: read checkpoint %s: %w", uri, err)
	}
	switch {
	case IsAdapterCheckpoint(ck) && lora != nil:
		return loadAdapterCheckpoint(ctx, cl, newEngine, ck, optim, *lora, withOptimizer)
	case IsAdapterCheckpoint(ck):
		eng, cfg, _, err := LoadAdapterEngine(ctx, cl, newEngine, ck, optim, false)
		return eng, cfg, nil, err
	case lora != nil:
		raw, err := ReadAll(ctx, ck, contract.ConfigFile)
		if err != nil {
			return nil, model.Config{}, nil, err
		}
		cfg, err := model.FromHFConfig(raw)
		if err != nil {
			return nil, cfg, nil, BadInput(fmt.Errorf("train: %s%s: %w", uri, contract.ConfigFile, err))
		}
		l := lora.WithDefaults()
		if _, err := l.Modules(cfg); err != nil {
			return nil, cfg, nil, BadInput(fmt.Errorf("train: lora on %s: %w", uri, err))
		}
		eng, err := newEngine(EngineOptions{Model: cfg, Optim: optim, LoRA: &l})
		if err != nil {
			return nil, cfg, nil, err
		}
		ae, err := adapterIO(eng, "lora on "+uri)
		if err != nil {
			eng.Close()
			return nil, cfg, nil, err
		}
		if err := LoadFile(ctx, ck, contract.ModelFile, eng.LoadWeights); err != nil {
			eng.Close()
			return nil, cfg, nil, err
		}
		return eng, cfg, &Adapters{LoRA: l, Base: ck.Ref.URI, io: ae}, nil
	}
	eng, cfg, _, err := LoadEngine(ctx, cl, newEngine, uri, optim, withOptimizer)
	return eng, cfg, nil, err
}

// WriteTrained adds what a chunk trained to a checkpoint: with ad nil the full model, config and
// optimizer state (WriteModel); with ad set the adapter files alone (adapter_config.json naming
// ad.Base, adapter_model.safetensors, optimizer.safetensors) and state.json.
func WriteTrained(ctx context.Context, w *ckpt.Writer, eng Engine, cfg model.Config, ad *Adapters, st ckpt.State) error {
	if ad == nil {
		return WriteModel(ctx, w, eng, cfg, st, true)
	}
	if ad.io == nil {
		return fmt.Errorf("train: write adapters: the engine (%T) holds no LoRA adapters", eng)
	}
	js, err := ad.LoRA.PEFTConfigJSON(cfg, ad.Base)
	if err != nil {
		return err
	}
	if err := w.Add(ctx, AdapterConfigFile, BytesReader(append(js, '\n'))); err != nil {
		return err
	}
	if err := Stream(ctx, w, AdapterFile, ad.io.SaveAdapters); err != nil {
		return err
	}
	if err := Stream(ctx, w, contract.OptimizerFile, eng.SaveOptimizer); err != nil {
		return err
	}
	return w.AddState(ctx, st)
}

// MergeCheckpoint reads an adapter checkpoint and its base and folds the adapters into the base
// weights on the host (model.MergeLoRA; no engine): it returns the base's config and the merged
// weights (internal paths), what `temper lora merge CKPT DIR` writes as a plain model directory.
func MergeCheckpoint(ctx context.Context, cl *ckpt.Client, uri string) (model.Config, map[string][]float32, error) {
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return model.Config{}, nil, fmt.Errorf("train: read checkpoint %s: %w", uri, err)
	}
	if !IsAdapterCheckpoint(ck) {
		return model.Config{}, nil, fmt.Errorf("train: merge %s: not a LoRA checkpoint (no %s)", uri, AdapterConfigFile)
	}
	return mergeAdapterCheckpoint(ctx, cl, ck)
}

func mergeAdapterCheckpoint(ctx context.Context, cl *ckpt.Client, ck *ckpt.Checkpoint) (model.Config, map[string][]float32, error) {
	l, base, err := readAdapterConfig(ctx, ck)
	if err != nil {
		return model.Config{}, nil, err
	}
	cfg, bck, err := readBase(ctx, cl, base, ck.Ref.URI)
	if err != nil {
		return model.Config{}, nil, err
	}
	hfShapes, err := cfg.HFShapes()
	if err != nil {
		return cfg, nil, err
	}
	peftShapes, err := l.PEFTShapes(cfg)
	if err != nil {
		return cfg, nil, BadInput(fmt.Errorf("train: %s%s: %w", ck.Ref.URI, AdapterConfigFile, err))
	}
	var weights, adapters map[string][]float32
	if err := LoadFile(ctx, bck, contract.ModelFile, func(r io.Reader) error {
		hf, err := readTensors(r, hfShapes)
		if err != nil {
			return err
		}
		weights, err = cfg.FromHF(hf)
		return err
	}); err != nil {
		return cfg, nil, err
	}
	if err := LoadFile(ctx, ck, AdapterFile, func(r io.Reader) error {
		peft, err := readTensors(r, peftShapes)
		if err != nil {
			return err
		}
		adapters, err = l.FromPEFT(cfg, peft)
		return err
	}); err != nil {
		return cfg, nil, err
	}
	merged, err := model.MergeLoRA(cfg, l, weights, adapters)
	if err != nil {
		return cfg, nil, fmt.Errorf("train: merge %s: %w", ck.Ref.URI, err)
	}
	return cfg, merged, nil
}

// readTensors reads a safetensors stream into float32 data by tensor name; a tensor named in want
// must have that shape.
func readTensors(r io.Reader, want map[string][]int) (map[string][]float32, error) {
	f, err := safetensors.Read(r)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]float32, len(f.Tensors))
	for _, t := range f.Tensors {
		if s, ok := want[t.Name]; ok && !slices.Equal(s, t.Shape) {
			return nil, fmt.Errorf("tensor %q has shape %v, want %v", t.Name, t.Shape, s)
		}
		d, err := t.ToFloat32()
		if err != nil {
			return nil, err
		}
		out[t.Name] = d
	}
	return out, nil
}

// writeHF writes internal weights as a Hugging Face safetensors stream (F32).
func writeHF(w io.Writer, cfg model.Config, weights map[string][]float32) error {
	hf, err := cfg.ToHF(weights)
	if err != nil {
		return err
	}
	shp, err := cfg.HFShapes()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(hf))
	for n := range hf {
		names = append(names, n)
	}
	slices.Sort(names)
	ts := make([]safetensors.Tensor, 0, len(names))
	for _, n := range names {
		t, err := safetensors.FromFloat32(n, shp[n], hf[n], safetensors.F32)
		if err != nil {
			return err
		}
		ts = append(ts, t)
	}
	return safetensors.Write(w, ts, map[string]string{"format": "pt"})
}
