package model

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"
)

// Variable paths, relative to the scope the model is built in (Forward's scope). Linear weights
// are stored [in, out] (x·W), the transpose of Hugging Face's [out, in]; q/k/v and gate/up are fused
// column-wise (see HFNames for the split).
const (
	VarEmbed    = "embed/tokens"              // [vocab, d]
	VarAttnNorm = "layers/%d/attn_norm/scale" // [d]
	VarQKV      = "layers/%d/attn/qkv"        // [d, (heads+2·kv_heads)·head_dim]: q | k | v columns
	VarQKVBias  = "layers/%d/attn/qkv_bias"   // [(heads+2·kv_heads)·head_dim] (qkv_bias only)
	VarAttnOut  = "layers/%d/attn/out"        // [heads·head_dim, d]
	VarMLPNorm  = "layers/%d/mlp_norm/scale"  // [d]

	VarAttnOutBias  = "layers/%d/attn/out_bias"        // [d] (attn_out_bias only)
	VarQNorm        = "layers/%d/attn/q_norm/scale"    // [head_dim] (qk_norm only)
	VarKNorm        = "layers/%d/attn/k_norm/scale"    // [head_dim] (qk_norm only)
	VarAttnPostNorm = "layers/%d/attn_post_norm/scale" // [d] (post_norms only)
	VarMLPPostNorm  = "layers/%d/mlp_post_norm/scale"  // [d] (post_norms only)

	VarGateUp    = "layers/%d/mlp/gate_up" // [d, 2·ffn]: gate | up columns
	VarDown      = "layers/%d/mlp/down"    // [ffn, d]
	VarFinalNorm = "final_norm/scale"      // [d]
	VarLMHead    = "lm_head/w"             // [d, vocab] (untied only)
	VarValueW    = "value_head/w"          // [d, 1] (value_head only)
	VarValueB    = "value_head/b"          // [1] (value_head only)
	VarValueLP   = "value_head/logprob"    // [1] (reward_logprob only): α of the generative reward term
)

// VarSpec is one model variable: its path relative to the model scope and its shape.
type VarSpec struct {
	Path  string
	Shape []int
}

// Size is the number of elements.
func (v VarSpec) Size() int {
	n := 1
	for _, d := range v.Shape {
		n *= d
	}
	return n
}

// Variables lists every variable of the model, in a fixed order.
func (c Config) Variables() []VarSpec {
	d := c.DModel
	vs := []VarSpec{{VarEmbed, []int{c.Vocab, d}}}
	for l := range c.Layers {
		f := func(p string) string { return fmt.Sprintf(p, l) }
		vs = append(vs, VarSpec{f(VarAttnNorm), []int{d}}, VarSpec{f(VarQKV), []int{d, c.qkvWidth()}})
		if c.QKVBias {
			vs = append(vs, VarSpec{f(VarQKVBias), []int{c.qkvWidth()}})
		}
		vs = append(vs,
			VarSpec{f(VarAttnOut), []int{c.Heads * c.HeadDim, d}},
			VarSpec{f(VarMLPNorm), []int{d}},
			VarSpec{f(VarGateUp), []int{d, 2 * c.FFN}},
			VarSpec{f(VarDown), []int{c.FFN, d}})
		// Variables of the newer features come after a layer's original ones, so that InitWeights
		// draws the same values as before for configs without them.
		if c.AttnOutBias {
			vs = append(vs, VarSpec{f(VarAttnOutBias), []int{d}})
		}
		if c.QKNorm {
			vs = append(vs, VarSpec{f(VarQNorm), []int{c.HeadDim}}, VarSpec{f(VarKNorm), []int{c.HeadDim}})
		}
		if c.PostNorms {
			vs = append(vs, VarSpec{f(VarAttnPostNorm), []int{d}}, VarSpec{f(VarMLPPostNorm), []int{d}})
		}
	}
	vs = append(vs, VarSpec{VarFinalNorm, []int{d}})
	if !c.TiedEmbeddings {
		vs = append(vs, VarSpec{VarLMHead, []int{d, c.Vocab}})
	}
	if c.ValueHead {
		vs = append(vs, VarSpec{VarValueW, []int{d, 1}}, VarSpec{VarValueB, []int{1}})
		if c.RewardLogProb {
			vs = append(vs, VarSpec{VarValueLP, []int{1}})
		}
	}
	return vs
}

// SubScope walks a relative path "a/b/name" from scope and returns the scope of "a/b" and "name".
func SubScope(scope *gm.Scope, path string) (*gm.Scope, string) {
	parts := strings.Split(path, "/")
	for _, p := range parts[:len(parts)-1] {
		scope = scope.At("%s", p)
	}
	return scope, parts[len(parts)-1]
}

// InitWeights creates every variable of cfg under scope with RandomWeights(cfg, seed, std).
// Existing variables are overwritten.
func InitWeights(scope *gm.Scope, cfg Config, seed uint64, std float64) error {
	w, err := RandomWeights(cfg, seed, std)
	if err != nil {
		return err
	}
	return ImportWeights(scope, cfg, w)
}

// RandomWeights are cfg's deterministic random weights from seed, drawn in plain Go on the host (so
// the same seed gives the same weights on any backend, and a model of a real size can be made without
// building a graph): linear and embedding weights ~ N(0, std²) (std <= 0 means 0.02, Hugging Face's
// initializer_range), biases 0, norm scales 1 (0 when NormPlusOne, so the effective scale is 1), the
// reward's log-prob weight 1.
func RandomWeights(cfg Config, seed uint64, std float64) (map[string][]float32, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if std <= 0 {
		std = 0.02
	}
	rng := rand.New(rand.NewPCG(seed, 0x7e3e3))
	w := make(map[string][]float32)
	for _, v := range cfg.Variables() {
		data := make([]float32, v.Size())
		switch {
		case strings.HasSuffix(v.Path, "/scale"):
			if !cfg.NormPlusOne {
				for i := range data {
					data[i] = 1
				}
			}
		case strings.HasSuffix(v.Path, "_bias") || v.Path == VarValueB:
		case v.Path == VarValueLP:
			data[0] = 1 // the reward starts as value + the completion's log-likelihood
		default:
			for i := range data {
				data[i] = float32(rng.NormFloat64() * std)
			}
		}
		w[v.Path] = data
	}
	return w, nil
}

// ImportWeights sets every variable of cfg under scope from w (internal paths → flat row-major
// float32 data), creating the variables as needed. It fails if any variable is missing or has the
// wrong size; extra entries are an error too (they usually mean a config mismatch).
func ImportWeights(scope *gm.Scope, cfg Config, w map[string][]float32) error {
	return SetVariables(scope, "model: import weights", cfg.Variables(), w)
}

// ExportWeights copies every variable of cfg under scope to host memory (internal paths → flat
// row-major float32 data).
func ExportWeights(scope *gm.Scope, cfg Config) (map[string][]float32, error) {
	return GetVariables(scope, "model: export weights", cfg.Variables())
}

// GetVariables copies specs under scope to host memory (paths → flat data), checking each one's size;
// op prefixes errors ("model: export weights").
func GetVariables(scope *gm.Scope, op string, specs []VarSpec) (map[string][]float32, error) {
	out := make(map[string][]float32, len(specs))
	for _, v := range specs {
		s, name := SubScope(scope, v.Path)
		vr := s.GetVariable(name)
		if vr == nil {
			return nil, fmt.Errorf("%s: missing variable %q", op, v.Path)
		}
		t, err := vr.Value()
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", op, v.Path, err)
		}
		data, err := tensors.CopyFlatData[float32](t)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", op, v.Path, err)
		}
		if len(data) != v.Size() {
			return nil, fmt.Errorf("%s: %q has shape %s, want %v", op, v.Path, t.Shape(), v.Shape)
		}
		out[v.Path] = data
	}
	return out, nil
}

// SetVariables creates or overwrites specs under scope from w, checking that w holds exactly them;
// op prefixes errors ("model: import weights").
func SetVariables(scope *gm.Scope, op string, specs []VarSpec, w map[string][]float32) error {
	if len(w) != len(specs) {
		known := make(map[string]bool, len(specs))
		for _, v := range specs {
			known[v.Path] = true
		}
		for p := range w {
			if !known[p] {
				return fmt.Errorf("%s: unexpected variable %q", op, p)
			}
		}
	}
	for _, v := range specs {
		data, ok := w[v.Path]
		if !ok {
			return fmt.Errorf("%s: missing variable %q", op, v.Path)
		}
		if len(data) != v.Size() {
			return fmt.Errorf("%s: variable %q has %d values, want %v", op, v.Path, len(data), v.Shape)
		}
		t := tensors.FromFlatDataAndDimensions(append([]float32(nil), data...), v.Shape...)
		s, name := SubScope(scope, v.Path)
		if existing := s.GetVariable(name); existing != nil {
			if err := existing.SetValue(t); err != nil {
				return fmt.Errorf("%s: set %q: %w", op, v.Path, err)
			}
			continue
		}
		if _, err := s.CreateVariable(name, t); err != nil {
			return fmt.Errorf("%s: create %q: %w", op, v.Path, err)
		}
	}
	return nil
}
