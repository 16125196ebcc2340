package hf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// owners maps every Hugging Face tensor of cfg to its internal variable, and counts each
// variable's tensors.
func owners(cfg model.Config) (map[string]string, map[string]int, error) {
	owner, parts := map[string]string{}, map[string]int{}
	for _, v := range cfg.Variables() {
		names, err := cfg.HFNames(v.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("hf: %w", err)
		}
		for _, n := range names {
			owner[n] = v.Path
		}
		parts[v.Path] = len(names)
	}
	return owner, parts, nil
}

// ReadWeights reads one safetensors stream holding cfg's tensors (a file, or OpenWeights' join of
// shards) into internal weights (model.Config.Variables paths, float32), one tensor at a time: a
// tensor's bytes are converted as they arrive and a variable is assembled as soon as its tensors
// (q, k, v of a fused qkv) are in, so the only full copy held is the float32 result. It returns
// the dtype the weights came in (the majority's, for mixed files). Names, shapes and dtypes are
// checked against cfg first; a tied model's lm_head.weight is skipped; what names a file in
// errors is what.
func ReadWeights(r io.Reader, cfg model.Config, what string) (map[string][]float32, safetensors.DType, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	h, err := safetensors.ReadHeader(br)
	if err != nil {
		return nil, "", badf("hf: %s: %w", what, err)
	}
	counts := map[safetensors.DType]int{}
	for _, e := range h.Entries {
		if !slices.Contains(FloatDTypes, e.DType) {
			return nil, "", badf("hf: %s: tensor %q has dtype %s: supported %s", what, e.Name, e.DType, dtypeList())
		}
		counts[e.DType]++
	}
	if err := CheckTensors(cfg, func(yield func(string, []int, string) bool) {
		for _, e := range h.Entries {
			if !yield(e.Name, e.Shape, what) {
				return
			}
		}
	}); err != nil {
		return nil, "", err
	}
	owner, parts, err := owners(cfg)
	if err != nil {
		return nil, "", err
	}
	out := make(map[string][]float32, len(parts))
	pending := map[string]map[string][]float32{}
	var buf []byte
	for _, e := range h.Entries { // in data order, contiguous from 0 (ReadHeader checks)
		size := e.End - e.Begin
		path, ok := owner[e.Name]
		if !ok { // a tied model's lm_head.weight
			if n, err := io.CopyN(io.Discard, br, size); err != nil {
				return nil, "", badf("hf: %s: tensor %q: truncated after %d of %d bytes: %w", what, e.Name, n, size, eofUnexpected(err))
			}
			continue
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		if n, err := io.ReadFull(br, buf[:size]); err != nil {
			return nil, "", badf("hf: %s: tensor %q: truncated after %d of %d bytes: %w", what, e.Name, n, size, eofUnexpected(err))
		}
		data, err := safetensors.Tensor{Name: e.Name, DType: e.DType, Shape: e.Shape, Data: buf[:size]}.ToFloat32()
		if err != nil {
			return nil, "", fmt.Errorf("hf: %s: %w", what, err)
		}
		p := pending[path]
		if p == nil {
			p = map[string][]float32{}
			pending[path] = p
		}
		p[e.Name] = data
		if len(p) == parts[path] {
			v, err := cfg.FromHFVariable(path, p)
			if err != nil {
				return nil, "", fmt.Errorf("hf: %s: %w", what, err)
			}
			out[path] = v
			delete(pending, path)
		}
	}
	var one [1]byte
	if n, _ := io.ReadFull(br, one[:]); n != 0 {
		return nil, "", badf("hf: %s: trailing bytes after the %d-byte data buffer", what, h.DataSize)
	}
	return out, mainDType(counts, nil), nil
}

func eofUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// hfView hands out cfg's Hugging Face tensors from internal weights one at a time, converting a
// variable when its first tensor is asked for and forgetting each tensor once handed out.
type hfView struct {
	cfg   model.Config
	w     map[string][]float32
	owner map[string]string
	cache map[string]map[string][]float32
}

func newHFView(cfg model.Config, w map[string][]float32) (*hfView, error) {
	owner, _, err := owners(cfg)
	if err != nil {
		return nil, err
	}
	return &hfView{cfg: cfg, w: w, owner: owner, cache: map[string]map[string][]float32{}}, nil
}

func (v *hfView) tensor(name string) ([]float32, error) {
	path, ok := v.owner[name]
	if !ok {
		return nil, fmt.Errorf("hf: tensor %q is not part of this %s model", name, v.cfg.Family)
	}
	parts, ok := v.cache[path]
	if !ok {
		var err error
		if parts, err = v.cfg.ToHFVariable(path, v.w[path]); err != nil {
			return nil, fmt.Errorf("hf: %w", err)
		}
		v.cache[path] = parts
	}
	d, ok := parts[name]
	if !ok {
		return nil, fmt.Errorf("hf: tensor %q asked for twice", name)
	}
	delete(parts, name)
	if len(parts) == 0 {
		delete(v.cache, path)
	}
	return d, nil
}

// weightsMetadata is the metadata transformers' save_pretrained gives every weights file.
var weightsMetadata = map[string]string{"format": "pt"}

// WriteWeights writes cfg's weights (internal paths) as one safetensors stream with Hugging Face
// names in dtype ("" is F32), converting one variable at a time.
func WriteWeights(w io.Writer, cfg model.Config, weights map[string][]float32, dtype safetensors.DType) error {
	shapes, err := cfg.HFShapes()
	if err != nil {
		return fmt.Errorf("hf: write weights: %w", err)
	}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	return writeTensors(w, cfg, weights, names, shapes, dtype)
}

// writeTensors writes the named tensors of cfg's weights as one safetensors file.
func writeTensors(w io.Writer, cfg model.Config, weights map[string][]float32, names []string, shapes map[string][]int, dtype safetensors.DType) error {
	if dtype == "" {
		dtype = safetensors.F32
	}
	if !slices.Contains(FloatDTypes, dtype) {
		return fmt.Errorf("hf: write weights: dtype %q: supported %s", dtype, dtypeList())
	}
	view, err := newHFView(cfg, weights)
	if err != nil {
		return err
	}
	specs := make([]safetensors.Spec, len(names))
	for i, n := range names {
		specs[i] = safetensors.Spec{Name: n, DType: dtype, Shape: shapes[n]}
	}
	return safetensors.WriteStream(w, specs, weightsMetadata, func(s safetensors.Spec, w io.Writer) error {
		d, err := view.tensor(s.Name)
		if err != nil {
			return err
		}
		return safetensors.EncodeFloat32(w, d, dtype)
	})
}
