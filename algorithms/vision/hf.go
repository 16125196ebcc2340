package vision

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// Prefixes under which checkpoints keep the tower, tried in this order by DetectPrefix:
// SiglipVisionModel and SiglipModel ("vision_model."), PaliGemma-style models before and after
// transformers 4.52 ("vision_tower.vision_model.", "model.vision_tower.vision_model.").
var Prefixes = []string{"vision_model.", "vision_tower.vision_model.", "model.vision_tower.vision_model."}

// PrefixVisionModel is the prefix SiglipVisionModel writes and ToHF uses by default.
const PrefixVisionModel = "vision_model."

// HFShapes returns the Hugging Face name (with prefix) and shape of every tensor of the tower.
func HFShapes(cfg visioncfg.Config, prefix string) map[string][]int {
	out := map[string][]int{}
	for _, s := range specs(cfg) {
		out[prefix+s.HF] = s.HFShape
	}
	return out
}

// HFName returns the Hugging Face tensor name (without prefix) of an internal variable.
func HFName(cfg visioncfg.Config, path string) (string, error) {
	for _, s := range specs(cfg) {
		if s.Path == path {
			return s.HF, nil
		}
	}
	return "", fmt.Errorf("vision: hf name: variable %q not in this config", path)
}

// ToHF converts internal weights to Hugging Face tensors named with prefix (PrefixVisionModel for
// a SiglipVisionModel checkpoint): linear and patch weights transposed to [out, in] (the patch
// weight reshaped to the convolution's [d, C, p, p]), the probe to [1, 1, d].
func ToHF(cfg visioncfg.Config, w map[string][]float32, prefix string) (map[string][]float32, error) {
	out := map[string][]float32{}
	for _, s := range specs(cfg) {
		data, ok := w[s.Path]
		if !ok || len(data) != s.size() {
			return nil, fmt.Errorf("vision: to hf: variable %q missing or not of shape %v", s.Path, s.Shape)
		}
		if s.Transpose {
			data = model.TransposeFlat(data, s.Shape[0], s.Shape[1])
		} else {
			data = slices.Clone(data)
		}
		out[prefix+s.HF] = data
	}
	return out, nil
}

// FromHF converts Hugging Face tensors to internal weights (for ImportWeights). Tensors outside
// prefix are ignored (a SiglipModel's text tower, a PaliGemma's language model); under it, every
// tensor of the tower must be present with its shape and no other may be (an unexpected one, such
// as head.* when the config has no head, means the config does not describe the checkpoint).
func FromHF(cfg visioncfg.Config, hf map[string][]float32, prefix string) (map[string][]float32, error) {
	return fromHF(cfg, prefix, func(name string) bool { _, ok := hf[name]; return ok },
		func(name string) ([]float32, []int, error) { return hf[name], nil, nil }, keys(hf))
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// fromHF reads each tensor through get (which may report the stored shape, nil to skip the check
// beyond the element count).
func fromHF(cfg visioncfg.Config, prefix string, has func(string) bool, get func(string) ([]float32, []int, error), names []string) (map[string][]float32, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	want := HFShapes(cfg, prefix)
	for _, n := range names {
		if _, ok := want[n]; !ok && strings.HasPrefix(n, prefix) {
			return nil, fmt.Errorf("vision: from hf: unexpected tensor %q for this config (use_head=%v, layers=%d)", n, cfg.UseHead, cfg.Layers)
		}
	}
	out := map[string][]float32{}
	for _, s := range specs(cfg) {
		name := prefix + s.HF
		if !has(name) {
			return nil, fmt.Errorf("vision: from hf: tensor %q missing", name)
		}
		data, shape, err := get(name)
		if err != nil {
			return nil, err
		}
		if (shape != nil && !slices.Equal(shape, s.HFShape)) || len(data) != s.size() {
			got := shape
			if got == nil {
				got = []int{len(data)}
			}
			return nil, fmt.Errorf("vision: from hf: tensor %q has shape %v, want %v", name, got, s.HFShape)
		}
		if s.Transpose {
			data = model.TransposeFlat(data, s.Shape[1], s.Shape[0])
		} else {
			data = slices.Clone(data)
		}
		out[s.Path] = data
	}
	return out, nil
}

// DetectPrefix returns the first of Prefixes under which names hold the tower's patch embedding.
func DetectPrefix(names []string) (string, error) {
	for _, p := range Prefixes {
		if slices.Contains(names, p+"embeddings.patch_embedding.weight") {
			return p, nil
		}
	}
	return "", fmt.Errorf("vision: no SigLIP vision tower in the checkpoint: no tensor <prefix>embeddings.patch_embedding.weight with a prefix in %q", Prefixes)
}

// ReadHF reads the tower's tensors from a safetensors file (the whole file readable at r), in
// any float dtype the safetensors package widens (F32, F16, BF16, F64), without reading the
// tensors of other parts of a larger checkpoint. The prefix is detected (DetectPrefix).
func ReadHF(cfg visioncfg.Config, r io.ReaderAt, size int64) (w map[string][]float32, prefix string, err error) {
	h, err := safetensors.ReadHeader(io.NewSectionReader(r, 0, size))
	if err != nil {
		return nil, "", fmt.Errorf("vision: read hf: %w", err)
	}
	names := make([]string, len(h.Entries))
	for i, e := range h.Entries {
		names[i] = e.Name
	}
	if prefix, err = DetectPrefix(names); err != nil {
		return nil, "", err
	}
	get := func(name string) ([]float32, []int, error) {
		e, _ := h.Entry(name)
		t, err := h.ReadTensor(r, name)
		if err != nil {
			return nil, nil, fmt.Errorf("vision: read hf: %w", err)
		}
		data, err := t.ToFloat32()
		if err != nil {
			return nil, nil, fmt.Errorf("vision: read hf: %s: %w", name, err)
		}
		return data, e.Shape, nil
	}
	has := func(name string) bool { _, ok := h.Entry(name); return ok }
	w, err = fromHF(cfg, prefix, has, get, names)
	return w, prefix, err
}

// WriteHF writes a SiglipVisionModel model.safetensors (F32, names with PrefixVisionModel) of the
// tower's weights to out.
func WriteHF(out io.Writer, cfg visioncfg.Config, w map[string][]float32) error {
	hf, err := ToHF(cfg, w, PrefixVisionModel)
	if err != nil {
		return err
	}
	shapes := HFShapes(cfg, PrefixVisionModel)
	ts := make([]safetensors.Tensor, 0, len(hf))
	for _, name := range keys(hf) {
		t, err := safetensors.FromFloat32(name, shapes[name], hf[name], safetensors.F32)
		if err != nil {
			return fmt.Errorf("vision: write hf: %w", err)
		}
		ts = append(ts, t)
	}
	if err := safetensors.Write(out, ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("vision: write hf: %w", err)
	}
	return nil
}
