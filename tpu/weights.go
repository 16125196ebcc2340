package tpu

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// Files of a model directory (Hugging Face layout).
const (
	ConfigFile  = "config.json"
	WeightsFile = "model.safetensors"
)

// ExportWeights copies the weights to host memory (internal variable paths → flat float32).
func (r *Runtime) ExportWeights() (w map[string][]float32, err error) {
	const op = "export weights"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return nil, err
	}
	defer recoverInto(op, &err)
	w, err = model.ExportWeights(r.scope, r.cfg)
	if err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	return w, nil
}

// ImportWeights replaces the weights (internal variable paths → flat float32; every variable of
// the config exactly once). The optimizer state is left as it is.
func (r *Runtime) ImportWeights(w map[string][]float32) (err error) {
	const op = "import weights"
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("tpu: %s: %w", op, ErrClosed)
	}
	if r.broken != nil {
		return fmt.Errorf("tpu: %s: runtime unusable after an earlier failure: %w", op, r.broken)
	}
	defer recoverInto(op, &err)
	if err := model.ImportWeights(r.scope, r.cfg, w); err != nil {
		return fmt.Errorf("tpu: %s: %w", op, err)
	}
	if r.params == nil {
		return r.bindParams()
	}
	return nil
}

// SaveWeights writes the weights as safetensors with Hugging Face tensor names, in dtype (F32,
// BF16, F16 or F64; "" → F32).
func (r *Runtime) SaveWeights(w io.Writer, dtype safetensors.DType) error {
	if dtype == "" {
		dtype = safetensors.F32
	}
	internal, err := r.ExportWeights()
	if err != nil {
		return err
	}
	hf, err := r.cfg.ToHF(internal)
	if err != nil {
		return fmt.Errorf("tpu: save weights: %w", err)
	}
	shapes, err := r.cfg.HFShapes()
	if err != nil {
		return fmt.Errorf("tpu: save weights: %w", err)
	}
	names := make([]string, 0, len(hf))
	for n := range hf {
		names = append(names, n)
	}
	slices.Sort(names)
	ts := make([]safetensors.Tensor, 0, len(names))
	for _, n := range names {
		t, err := safetensors.FromFloat32(n, shapes[n], hf[n], dtype)
		if err != nil {
			return fmt.Errorf("tpu: save weights: %w", err)
		}
		ts = append(ts, t)
	}
	if err := safetensors.Write(w, ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("tpu: save weights: %w", err)
	}
	return nil
}

// LoadWeights reads Hugging Face safetensors weights (F32, BF16, F16 or F64) for this config and
// replaces the model's weights. Every tensor of the config must be there with its shape;
// lm_head.weight of a tied model is ignored.
func (r *Runtime) LoadWeights(rd io.Reader) error {
	f, err := safetensors.Read(rd)
	if err != nil {
		return fmt.Errorf("tpu: load weights: %w", err)
	}
	shapes, err := r.cfg.HFShapes()
	if err != nil {
		return fmt.Errorf("tpu: load weights: %w", err)
	}
	hf := make(map[string][]float32, len(f.Tensors))
	for _, t := range f.Tensors {
		if want, ok := shapes[t.Name]; ok && !slices.Equal(want, t.Shape) {
			return fmt.Errorf("tpu: load weights: tensor %q has shape %v, want %v", t.Name, t.Shape, want)
		}
		data, err := t.ToFloat32()
		if err != nil {
			return fmt.Errorf("tpu: load weights: %w", err)
		}
		hf[t.Name] = data
	}
	internal, err := r.cfg.FromHF(hf)
	if err != nil {
		return fmt.Errorf("tpu: load weights: %w", err)
	}
	return r.ImportWeights(internal)
}

// SaveModelDir writes dir/config.json and dir/model.safetensors (F32), each through a temporary
// file renamed into place.
func (r *Runtime) SaveModelDir(dir string) error {
	cfgJSON, err := r.cfg.ToHFConfig()
	if err != nil {
		return fmt.Errorf("tpu: save model dir %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tpu: save model dir: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, ConfigFile), func(w io.Writer) error {
		_, err := w.Write(append(cfgJSON, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("tpu: save model dir %s: %w", dir, err)
	}
	if err := writeFileAtomic(filepath.Join(dir, WeightsFile), func(w io.Writer) error {
		return r.SaveWeights(w, safetensors.F32)
	}); err != nil {
		return fmt.Errorf("tpu: save model dir %s: %w", dir, err)
	}
	return nil
}

func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadModelConfig reads dir/config.json; a value head is recognised from a "score.weight" tensor
// in dir/model.safetensors.
func ReadModelConfig(dir string) (model.Config, error) {
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return model.Config{}, fmt.Errorf("tpu: read model config: %w", err)
	}
	cfg, err := model.FromHFConfig(data)
	if err != nil {
		return model.Config{}, fmt.Errorf("tpu: read model config %s: %w", dir, err)
	}
	f, err := os.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		return model.Config{}, fmt.Errorf("tpu: read model config: %w", err)
	}
	defer f.Close()
	h, err := safetensors.ReadHeader(bufio.NewReader(f))
	if err != nil {
		return model.Config{}, fmt.Errorf("tpu: read model config %s: %w", dir, err)
	}
	return cfg.WithHeads(func(name string) bool { _, ok := h.Entry(name); return ok }), nil
}

// NewFromDir creates a Runtime for the model in dir (config.json + model.safetensors); opts.Model
// is taken from the directory.
func NewFromDir(dir string, opts Options) (*Runtime, error) {
	cfg, err := ReadModelConfig(dir)
	if err != nil {
		return nil, err
	}
	opts.Model = cfg
	opts.skipInit = true
	r, err := New(opts)
	if err != nil {
		return nil, err
	}
	if err := r.LoadModelDir(dir); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// LoadModelDir replaces the weights with dir/model.safetensors; dir/config.json must describe
// this Runtime's architecture.
func (r *Runtime) LoadModelDir(dir string) error {
	cfg, err := ReadModelConfig(dir)
	if err != nil {
		return err
	}
	if !sameArchitecture(cfg, r.cfg) {
		return fmt.Errorf("tpu: load model dir %s: config %+v does not match the runtime's %+v", dir, cfg, r.cfg)
	}
	f, err := os.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		return fmt.Errorf("tpu: load model dir: %w", err)
	}
	defer f.Close()
	if err := r.LoadWeights(f); err != nil {
		return fmt.Errorf("tpu: load model dir %s: %w", dir, err)
	}
	return nil
}

// sameArchitecture compares what decides the weights' shapes and the graph's math.
func sameArchitecture(a, b model.Config) bool {
	a.MaxSeq, b.MaxSeq = 0, 0 // only a limit on inputs
	if len(a.LayerTypes) == 0 && len(b.LayerTypes) == 0 {
		a.LayerTypes, b.LayerTypes = nil, nil // nil and empty mean the same
	}
	return reflect.DeepEqual(a, b) // follows RopeScaling's pointer and compares LayerTypes
}
