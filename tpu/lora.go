package tpu

import (
	"fmt"
	"io"
	"slices"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.

	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
)

// LoRA training (Options.LoRA): the adapters are attached when the weights are bound (New, or the
// first ImportWeights), A seeded from LoRA.Seed and B zero, so
// before the first step every output equals the base model's. From then on r.params and r.specs
// hold the adapters only: TrainStep and StepObjective differentiate and update only them, the
// optimizer state covers only them, and the base weights (ExportWeights, SaveWeights) never change.
// Generation, logits, log-probs and losses all run base + adapters.

// attachLoRA attaches fresh adapters of r.opts.LoRA under the model scope and returns their specs.
func (r *Runtime) attachLoRA() ([]model.VarSpec, error) {
	l := *r.opts.LoRA
	if err := model.AttachLoRA(r.scope, r.cfg, l); err != nil {
		return nil, fmt.Errorf("tpu: attach lora: %w", err)
	}
	specs, err := l.Variables(r.cfg)
	if err != nil {
		return nil, fmt.Errorf("tpu: attach lora: %w", err)
	}
	return specs, nil
}

// markTraining tells the model graph being built in g that it is differentiated, at the
// optimizer's current step (which seeds adapter dropout): nothing to do without LoRA.
func (r *Runtime) markTraining(g *Graph) {
	if r.opts.LoRA == nil || r.opt == nil {
		return
	}
	model.SetLoRATrainingStep(r.scope, g, r.opt.step.NodeValue(g))
}

// LoRA returns the attached adapters' configuration (defaults filled in), if any.
func (r *Runtime) LoRA() (model.LoRA, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opts.LoRA == nil {
		return model.LoRA{}, false
	}
	l := *r.opts.LoRA
	l.Targets = slices.Clone(l.Targets)
	return l, true
}

// loraOp checks that adapters are attached and the runtime is usable (r.mu held).
func (r *Runtime) loraOp(op string) error {
	if err := r.usable(op); err != nil {
		return err
	}
	if r.opts.LoRA == nil {
		return fmt.Errorf("tpu: %s: no LoRA adapters (Options.LoRA is not set)", op)
	}
	return nil
}

// ExportAdapters copies the adapters to host memory (internal paths, model.LoRA.Variables).
func (r *Runtime) ExportAdapters() (w map[string][]float32, err error) {
	const op = "export adapters"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.loraOp(op); err != nil {
		return nil, err
	}
	defer recoverInto(op, &err)
	if w, err = model.ExportLoRA(r.scope, r.cfg); err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	return w, nil
}

// ImportAdapters replaces the adapters (internal paths; every adapter variable exactly once). The
// optimizer state is left as it is.
func (r *Runtime) ImportAdapters(w map[string][]float32) (err error) {
	const op = "import adapters"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.loraOp(op); err != nil {
		return err
	}
	defer recoverInto(op, &err)
	if err := model.ImportLoRA(r.scope, r.cfg, w); err != nil {
		return fmt.Errorf("tpu: %s: %w", op, err)
	}
	return nil
}

// SaveAdapters writes the adapters alone as a PEFT adapter_model.safetensors (F32):
// "base_model.model.<module>.lora_A.weight" [rank, in] and "….lora_B.weight" [out, rank].
func (r *Runtime) SaveAdapters(w io.Writer) error {
	internal, err := r.ExportAdapters()
	if err != nil {
		return err
	}
	l, _ := r.LoRA()
	if err := hf.WriteAdapters(w, r.cfg, l, internal); err != nil {
		return fmt.Errorf("tpu: save adapters: %w", err)
	}
	return nil
}

// LoadAdapters reads a PEFT adapter_model.safetensors (F32, BF16, F16 or F64) matching the
// attached adapters (same modules and rank) and replaces them.
func (r *Runtime) LoadAdapters(rd io.Reader) error {
	l, ok := r.LoRA()
	if !ok {
		return fmt.Errorf("tpu: load adapters: no LoRA adapters (Options.LoRA is not set)")
	}
	internal, err := hf.ReadAdapters(rd, r.cfg, l)
	if err != nil {
		return fmt.Errorf("tpu: load adapters: %w", err)
	}
	return r.ImportAdapters(internal)
}

// AdapterConfig returns the adapter_config.json of the attached adapters, naming base (the URI
// of the checkpoint they were trained on, or a Hugging Face model id) as their base model.
func (r *Runtime) AdapterConfig(base string) ([]byte, error) {
	l, ok := r.LoRA()
	if !ok {
		return nil, fmt.Errorf("tpu: adapter config: no LoRA adapters (Options.LoRA is not set)")
	}
	b, err := hf.AdapterConfigJSON(r.cfg, l, base)
	if err != nil {
		return nil, fmt.Errorf("tpu: adapter config: %w", err)
	}
	return b, nil
}

// SaveAdapterDir writes a PEFT adapter directory: dir/adapter_config.json (base as
// base_model_name_or_path) and dir/adapter_model.safetensors. The base weights are not copied.
func (r *Runtime) SaveAdapterDir(dir, base string) error {
	cfgJSON, err := r.AdapterConfig(base)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{hf.AdapterConfigFile, func(w io.Writer) error { _, err := w.Write(cfgJSON); return err }},
		{hf.AdapterWeightsFile, r.SaveAdapters},
	} {
		if err := writeDirFile(dir, f.name, f.write); err != nil {
			return fmt.Errorf("tpu: save adapter dir %s: %w", dir, err)
		}
	}
	return nil
}

// writeDirFile writes one file of dir through DirSink.
func writeDirFile(dir, name string, write func(io.Writer) error) error {
	w, err := DirSink(dir).Create(name)
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		w.(*atomicFile).Abort()
		return err
	}
	return w.Close()
}

// MergedWeights returns plain weights with the adapters folded in, W' = W + (alpha/rank)·A·B per
// module (internal paths; ImportWeights or hf.WriteDir take them). The runtime is
// not changed.
func (r *Runtime) MergedWeights() (w map[string][]float32, err error) {
	const op = "merged weights"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.loraOp(op); err != nil {
		return nil, err
	}
	defer recoverInto(op, &err)
	return r.mergedWeights(op)
}

func (r *Runtime) mergedWeights(op string) (map[string][]float32, error) {
	base, err := model.ExportWeights(r.scope, r.cfg)
	if err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	ad, err := model.ExportLoRA(r.scope, r.cfg)
	if err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	merged, err := model.MergeLoRA(r.cfg, *r.opts.LoRA, base, ad)
	if err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	return merged, nil
}

// MergeLoRA folds the adapters into the base weights in place and removes them: the runtime then
// holds a plain model (every weight trainable, a fresh optimizer at the next step) whose outputs
// equal base + adapters up to float rounding. Compiled executables are dropped.
func (r *Runtime) MergeLoRA() (err error) {
	const op = "merge lora"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.loraOp(op); err != nil {
		return err
	}
	defer recoverInto(op, &err)
	merged, err := r.mergedWeights(op)
	if err != nil {
		return err
	}
	// Executables and the generator were compiled with the adapters (and their optimizer state).
	r.cache.clear()
	r.gen = nil
	if err := model.ImportWeights(r.scope, r.cfg, merged); err != nil {
		return fmt.Errorf("tpu: %s: %w", op, err)
	}
	if err := model.DetachLoRA(r.scope); err != nil {
		return fmt.Errorf("tpu: %s: %w", op, err)
	}
	if r.opt != nil {
		if err := r.store.RootScope().At(optScope).DeleteVariablesInScope(); err != nil {
			return fmt.Errorf("tpu: %s: drop optimizer: %w", op, err)
		}
		r.opt = nil
	}
	r.opts.LoRA = nil
	return r.bindParams()
}
