package tpu

import (
	"fmt"
	"io"
	"strconv"

	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/safetensors"
)

// OptimizerFormat is the "format" metadata of optimizer.safetensors files.
const OptimizerFormat = "temper.adamw.v1"

// OptimizerState is AdamW's state: the step count and both moments of every trainable variable,
// keyed by internal variable path (model.Config.Variables, or model.LoRA.Variables with
// Options.LoRA), flat row-major float32.
type OptimizerState struct {
	Step int64                `json:"step"`
	M    map[string][]float32 `json:"-"`
	V    map[string][]float32 `json:"-"`
}

// OptimizerState copies AdamW's state to the host. Before the first step it is step 0 with zero
// moments.
func (r *Runtime) OptimizerState() (s OptimizerState, err error) {
	const op = "optimizer state"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return s, err
	}
	defer recoverInto(op, &err)
	if err := r.ensureOptimizer(); err != nil {
		return s, fmt.Errorf("tpu: %s: %w", op, err)
	}
	s = OptimizerState{M: map[string][]float32{}, V: map[string][]float32{}}
	step, err := r.opt.step.Value()
	if err != nil {
		return s, fmt.Errorf("tpu: %s: step: %w", op, err)
	}
	s.Step = tensors.ToScalar[int64](step)
	for i, spec := range r.specs {
		for _, kv := range []struct {
			v   *gm.Variable
			dst map[string][]float32
		}{{r.opt.m[i], s.M}, {r.opt.v[i], s.V}} {
			t, err := kv.v.Value()
			if err != nil {
				return s, fmt.Errorf("tpu: %s: %s: %w", op, kv.v.Path(), err)
			}
			data, err := tensors.CopyFlatData[float32](t)
			if err != nil {
				return s, fmt.Errorf("tpu: %s: %s: %w", op, kv.v.Path(), err)
			}
			kv.dst[spec.Path] = data
		}
	}
	return s, nil
}

// SetOptimizerState replaces AdamW's state; every model variable needs both moments of its size.
func (r *Runtime) SetOptimizerState(s OptimizerState) (err error) {
	const op = "set optimizer state"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return err
	}
	defer recoverInto(op, &err)
	if s.Step < 0 {
		return fmt.Errorf("tpu: %s: step %d is negative", op, s.Step)
	}
	specs := r.specs
	known := make(map[string]bool, len(specs))
	for _, spec := range specs {
		known[spec.Path] = true
	}
	for _, kind := range []struct {
		name string
		m    map[string][]float32
	}{{"m", s.M}, {"v", s.V}} {
		for p := range kind.m {
			if !known[p] {
				return fmt.Errorf("tpu: %s: %s has unknown variable %q", op, kind.name, p)
			}
		}
		for _, spec := range specs {
			d, ok := kind.m[spec.Path]
			if !ok {
				return fmt.Errorf("tpu: %s: %s missing variable %q", op, kind.name, spec.Path)
			}
			if len(d) != spec.Size() {
				return fmt.Errorf("tpu: %s: %s %q has %d values, want %v", op, kind.name, spec.Path, len(d), spec.Shape)
			}
		}
	}
	if err := r.ensureOptimizer(); err != nil {
		return fmt.Errorf("tpu: %s: %w", op, err)
	}
	for i, spec := range specs {
		for _, kv := range []struct {
			v   *gm.Variable
			src []float32
		}{{r.opt.m[i], s.M[spec.Path]}, {r.opt.v[i], s.V[spec.Path]}} {
			t := tensors.FromFlatDataAndDimensions(append([]float32(nil), kv.src...), spec.Shape...)
			if err := kv.v.SetValue(t); err != nil {
				return fmt.Errorf("tpu: %s: %s: %w", op, kv.v.Path(), err)
			}
		}
	}
	if err := r.opt.step.SetValue(tensors.FromScalar(s.Step)); err != nil {
		return fmt.Errorf("tpu: %s: step: %w", op, err)
	}
	return nil
}

// SaveOptimizer writes AdamW's state as safetensors: F32 tensors "m/<variable path>" and
// "v/<variable path>", the step and hyperparameters in the metadata.
func (r *Runtime) SaveOptimizer(w io.Writer) error {
	s, err := r.OptimizerState()
	if err != nil {
		return err
	}
	o := r.opts.Optimizer
	meta := map[string]string{"format": OptimizerFormat, "step": strconv.FormatInt(s.Step, 10),
		"beta1": fmt.Sprint(o.Beta1), "beta2": fmt.Sprint(o.Beta2), "eps": fmt.Sprint(o.Eps),
		"weight_decay": fmt.Sprint(o.WeightDecay), "clip_norm": fmt.Sprint(o.ClipNorm)}
	var ts []safetensors.Tensor
	for _, spec := range r.specs {
		for _, kv := range []struct {
			prefix string
			data   []float32
		}{{"m/", s.M[spec.Path]}, {"v/", s.V[spec.Path]}} {
			t, err := safetensors.FromFloat32(kv.prefix+spec.Path, spec.Shape, kv.data, safetensors.F32)
			if err != nil {
				return fmt.Errorf("tpu: save optimizer: %w", err)
			}
			ts = append(ts, t)
		}
	}
	if err := safetensors.Write(w, ts, meta); err != nil {
		return fmt.Errorf("tpu: save optimizer: %w", err)
	}
	return nil
}

// LoadOptimizer reads a file written by SaveOptimizer and sets AdamW's state from it.
func (r *Runtime) LoadOptimizer(rd io.Reader) error {
	f, err := safetensors.Read(rd)
	if err != nil {
		return fmt.Errorf("tpu: load optimizer: %w", err)
	}
	if got := f.Metadata["format"]; got != OptimizerFormat {
		return fmt.Errorf("tpu: load optimizer: format %q, want %q", got, OptimizerFormat)
	}
	step, err := strconv.ParseInt(f.Metadata["step"], 10, 64)
	if err != nil {
		return fmt.Errorf("tpu: load optimizer: step %q: %w", f.Metadata["step"], err)
	}
	s := OptimizerState{Step: step, M: map[string][]float32{}, V: map[string][]float32{}}
	for _, t := range f.Tensors {
		var dst map[string][]float32
		var path string
		switch {
		case len(t.Name) > 2 && t.Name[:2] == "m/":
			dst, path = s.M, t.Name[2:]
		case len(t.Name) > 2 && t.Name[:2] == "v/":
			dst, path = s.V, t.Name[2:]
		default:
			return fmt.Errorf("tpu: load optimizer: unexpected tensor %q", t.Name)
		}
		data, err := t.ToFloat32()
		if err != nil {
			return fmt.Errorf("tpu: load optimizer: %w", err)
		}
		dst[path] = data
	}
	return r.SetOptimizerState(s)
}
