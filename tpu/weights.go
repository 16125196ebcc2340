package tpu

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
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
// BF16, F16 or F64; "" → F32), one variable converted at a time (hf.WriteWeights).
func (r *Runtime) SaveWeights(w io.Writer, dtype safetensors.DType) error {
	internal, err := r.ExportWeights()
	if err != nil {
		return err
	}
	if err := hf.WriteWeights(w, r.cfg, internal, dtype); err != nil {
		return fmt.Errorf("tpu: save weights: %w", err)
	}
	return nil
}

// LoadWeights reads Hugging Face safetensors weights (F32, BF16, F16 or F64; one file, or
// hf.Join's stream of shards) for this config and replaces the model's weights, one tensor
// streamed at a time (hf.ReadWeights). Every tensor of the config must be there with its shape;
// lm_head.weight of a tied model is ignored.
func (r *Runtime) LoadWeights(rd io.Reader) error {
	internal, _, err := hf.ReadWeights(rd, r.cfg, "weights")
	if err != nil {
		return fmt.Errorf("tpu: load weights: %w", err)
	}
	return r.ImportWeights(internal)
}

// SaveModelDir writes a Hugging Face model directory of the runtime's model (the causal LM and its
// value head, if any): config.json and model.safetensors (F32), each file through a temporary file
// renamed into place (hf.WriteDir).
func (r *Runtime) SaveModelDir(dir string) error {
	internal, err := r.ExportWeights()
	if err != nil {
		return err
	}
	if err := hf.WriteDir(DirSink(dir), r.cfg, internal, hf.Meta{}, hf.WriteOptions{}); err != nil {
		return fmt.Errorf("tpu: save model dir %s: %w", dir, err)
	}
	return nil
}

// DirSource reads a local directory (a Hugging Face model or adapter directory).
func DirSource(dir string) hf.Source { return hf.FS(os.DirFS(dir)) }

// DirSink writes files into a local directory (created if needed), each through a temporary file
// that is synced and renamed into place when closed, so a reader never sees half a file.
func DirSink(dir string) hf.Sink { return dirSink(dir) }

type dirSink string

func (d dirSink) Create(name string) (io.WriteCloser, error) {
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(string(d), name)
	tmp, err := os.CreateTemp(string(d), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &atomicFile{f: tmp, w: bufio.NewWriterSize(tmp, 1<<20), path: path}, nil
}

// atomicFile is a file renamed into place by Close; Abort removes it.
type atomicFile struct {
	f    *os.File
	w    *bufio.Writer
	path string
	done bool
}

func (a *atomicFile) Write(p []byte) (int, error) { return a.w.Write(p) }

func (a *atomicFile) Abort() {
	if !a.done {
		a.done = true
		a.f.Close()
		os.Remove(a.f.Name())
	}
}

func (a *atomicFile) Close() error {
	if a.done {
		return nil
	}
	err := a.w.Flush()
	if err == nil {
		err = a.f.Sync()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.done = true
	if err == nil {
		err = os.Rename(a.f.Name(), a.path)
	}
	if err != nil {
		os.Remove(a.f.Name())
	}
	return err
}
