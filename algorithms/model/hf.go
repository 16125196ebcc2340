package model

import (
	"fmt"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"regexp"
	"strconv"
)

// Hugging Face tensor names. The families share them, with three differences: Gemma 2/3 name their
// four norms input_layernorm, post_attention_layernorm (the attention output's norm),
// pre_feedforward_layernorm and post_feedforward_layernorm where the others have
// post_attention_layernorm before the MLP; Qwen3 and Gemma 3 add self_attn.q_norm/k_norm; Phi-3
// stores q|k|v as one self_attn.qkv_proj and gate|up as one mlp.gate_up_proj (our fused layout).
// Hugging Face linear weights are [out, in]; ours are [in, out], so every linear weight is
// transposed by ToHF/FromHF (embeddings are [vocab, d] on both sides, norms and biases are 1-D).
// Gemma's norm weights are stored as w in both (the graph computes ·(1+w)).
const (
	hfEmbed     = "model.embed_tokens.weight"
	hfLayer     = "model.layers.%d."
	hfFinalNorm = "model.norm.weight"
	hfLMHead    = "lm_head.weight"
	hfScoreW    = "score.weight"         // [1, d]: LlamaForSequenceClassification's head with one label
	hfScoreB    = "score.bias"           // [1]: ours; transformers' classification head has none
	hfScoreLP   = "score.logprob_weight" // [1]: ours, α of the generative reward term (reward_logprob)
)

// hfPart is one Hugging Face tensor cut from an internal variable: columns [lo, hi) of a 2-D [in, out]
// variable (transposed to [hi-lo, in]), or elements [lo, hi) of a 1-D one.
type hfPart struct {
	name      string
	lo, hi    int
	transpose bool
}

// hfParts maps an internal variable to its Hugging Face tensors.
func (c Config) hfParts(path string) ([]hfPart, error) {
	nh, nkv, f := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.FFN
	switch path {
	case VarEmbed:
		return []hfPart{{name: hfEmbed, hi: c.Vocab}}, nil
	case VarFinalNorm:
		return []hfPart{{name: hfFinalNorm, hi: c.DModel}}, nil
	case VarLMHead:
		if !c.TiedEmbeddings {
			return []hfPart{{name: hfLMHead, hi: c.Vocab, transpose: true}}, nil
		}
	case VarValueW:
		if c.ValueHead {
			return []hfPart{{name: hfScoreW, hi: 1, transpose: true}}, nil
		}
	case VarValueB:
		if c.ValueHead {
			return []hfPart{{name: hfScoreB, hi: 1}}, nil
		}
	case VarValueLP:
		if c.ValueHead && c.RewardLogProb {
			return []hfPart{{name: hfScoreLP, hi: 1}}, nil
		}
	}
	l, kind, ok := splitLayerPath(path)
	if !ok || l >= c.Layers {
		return nil, fmt.Errorf("model: hf names: unknown variable %q", path)
	}
	p := fmt.Sprintf(hfLayer, l)
	switch kind {
	case VarAttnNorm:
		return []hfPart{{name: p + "input_layernorm.weight", hi: c.DModel}}, nil
	case VarMLPNorm:
		if c.PostNorms {
			return []hfPart{{name: p + "pre_feedforward_layernorm.weight", hi: c.DModel}}, nil
		}
		return []hfPart{{name: p + "post_attention_layernorm.weight", hi: c.DModel}}, nil
	case VarAttnPostNorm:
		if c.PostNorms {
			return []hfPart{{name: p + "post_attention_layernorm.weight", hi: c.DModel}}, nil
		}
	case VarMLPPostNorm:
		if c.PostNorms {
			return []hfPart{{name: p + "post_feedforward_layernorm.weight", hi: c.DModel}}, nil
		}
	case VarQNorm:
		if c.QKNorm {
			return []hfPart{{name: p + "self_attn.q_norm.weight", hi: c.HeadDim}}, nil
		}
	case VarKNorm:
		if c.QKNorm {
			return []hfPart{{name: p + "self_attn.k_norm.weight", hi: c.HeadDim}}, nil
		}
	case VarAttnOutBias:
		if c.AttnOutBias {
			return []hfPart{{name: p + "self_attn.o_proj.bias", hi: c.DModel}}, nil
		}
	case VarQKV:
		if c.Family == modelcfg.FamilyPhi3 {
			return []hfPart{{p + "self_attn.qkv_proj.weight", 0, nh + 2*nkv, true}}, nil
		}
		return []hfPart{
			{p + "self_attn.q_proj.weight", 0, nh, true},
			{p + "self_attn.k_proj.weight", nh, nh + nkv, true},
			{p + "self_attn.v_proj.weight", nh + nkv, nh + 2*nkv, true}}, nil
	case VarQKVBias:
		if c.QKVBias {
			return []hfPart{
				{p + "self_attn.q_proj.bias", 0, nh, false},
				{p + "self_attn.k_proj.bias", nh, nh + nkv, false},
				{p + "self_attn.v_proj.bias", nh + nkv, nh + 2*nkv, false}}, nil
		}
	case VarAttnOut:
		return []hfPart{{name: p + "self_attn.o_proj.weight", hi: c.DModel, transpose: true}}, nil
	case VarGateUp:
		if c.Family == modelcfg.FamilyPhi3 {
			return []hfPart{{p + "mlp.gate_up_proj.weight", 0, 2 * f, true}}, nil
		}
		return []hfPart{
			{p + "mlp.gate_proj.weight", 0, f, true},
			{p + "mlp.up_proj.weight", f, 2 * f, true}}, nil
	case VarDown:
		return []hfPart{{name: p + "mlp.down_proj.weight", hi: c.DModel, transpose: true}}, nil
	}
	return nil, fmt.Errorf("model: hf names: variable %q not in this config", path)
}

var layerRE = regexp.MustCompile(`^layers/(\d+)/(.+)$`)

// splitLayerPath turns "layers/3/attn/qkv" into (3, VarQKV).
func splitLayerPath(path string) (int, string, bool) {
	m := layerRE.FindStringSubmatch(path)
	if m == nil {
		return 0, "", false
	}
	l, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, "", false
	}
	return l, "layers/%d/" + m[2], true
}

// HFNames returns the Hugging Face tensor names of an internal variable (several for the fused
// qkv and gate_up variables, in q,k,v / gate,up order).
func (c Config) HFNames(path string) ([]string, error) {
	parts, err := c.hfParts(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.name
	}
	return names, nil
}

// VariableForHF is the inverse of HFNames: the internal variable holding a Hugging Face tensor.
// lm_head.weight of a tied model maps to the embedding.
func (c Config) VariableForHF(name string) (string, error) {
	if name == hfLMHead && c.TiedEmbeddings {
		return VarEmbed, nil
	}
	for _, v := range c.Variables() {
		names, err := c.HFNames(v.Path)
		if err != nil {
			return "", err
		}
		for _, n := range names {
			if n == name {
				return v.Path, nil
			}
		}
	}
	return "", fmt.Errorf("model: hf tensor %q: not part of this %s config", name, c.Family)
}

// HFShapes returns the shape of every Hugging Face tensor of the config.
func (c Config) HFShapes() (map[string][]int, error) {
	out := map[string][]int{}
	for _, v := range c.Variables() {
		parts, err := c.hfParts(v.Path)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			switch {
			case len(v.Shape) == 1:
				out[p.name] = []int{p.hi - p.lo}
			case p.transpose:
				out[p.name] = []int{p.hi - p.lo, v.Shape[0]}
			default:
				out[p.name] = []int{v.Shape[0], v.Shape[1]}
			}
		}
	}
	return out, nil
}

// ToHF converts internal weights (ExportWeights) to Hugging Face tensors (flat row-major data,
// shapes from HFShapes): fused variables are split, linear weights transposed to [out, in].
func (c Config) ToHF(w map[string][]float32) (map[string][]float32, error) {
	out := map[string][]float32{}
	for _, v := range c.Variables() {
		parts, err := c.ToHFVariable(v.Path, w[v.Path])
		if err != nil {
			return nil, err
		}
		for n, d := range parts {
			out[n] = d
		}
	}
	return out, nil
}

// ToHFVariable converts one internal variable (path, its flat data) to its Hugging Face tensors
// (one, or several for the fused qkv and gate_up): ToHF one variable at a time, so that a writer
// can stream a model without a second copy of it.
func (c Config) ToHFVariable(path string, data []float32) (map[string][]float32, error) {
	v, ok := c.variable(path)
	if !ok || len(data) != v.Size() {
		return nil, fmt.Errorf("model: to hf: variable %q missing or not of shape %v", path, v.Shape)
	}
	parts, err := c.hfParts(v.Path)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]float32, len(parts))
	for _, p := range parts {
		switch {
		case len(v.Shape) == 1:
			out[p.name] = append([]float32(nil), data[p.lo:p.hi]...)
		case p.transpose:
			in, cols := v.Shape[0], v.Shape[1]
			t := make([]float32, (p.hi-p.lo)*in)
			for o := p.lo; o < p.hi; o++ {
				for i := range in {
					t[(o-p.lo)*in+i] = data[i*cols+o]
				}
			}
			out[p.name] = t
		default:
			out[p.name] = append([]float32(nil), data...)
		}
	}
	return out, nil
}

// variable returns the spec of the variable at path.
func (c Config) variable(path string) (VarSpec, bool) {
	for _, v := range c.Variables() {
		if v.Path == path {
			return v, true
		}
	}
	return VarSpec{}, false
}

// FromHF converts Hugging Face tensors to internal weights (for ImportWeights): the inverse of ToHF.
// Every tensor of the config must be present; lm_head.weight of a tied model is ignored, any other
// extra tensor is an error.
func (c Config) FromHF(hf map[string][]float32) (map[string][]float32, error) {
	shapes, err := c.HFShapes()
	if err != nil {
		return nil, err
	}
	for name := range hf {
		if _, ok := shapes[name]; !ok && !(name == hfLMHead && c.TiedEmbeddings) {
			return nil, fmt.Errorf("model: from hf: unexpected tensor %q for this %s config", name, c.Family)
		}
	}
	out := map[string][]float32{}
	for _, v := range c.Variables() {
		data, err := c.FromHFVariable(v.Path, hf)
		if err != nil {
			return nil, err
		}
		out[v.Path] = data
	}
	return out, nil
}

// FromHFVariable assembles one internal variable from its Hugging Face tensors (HFNames(path), each
// of its HFShapes size): FromHF one variable at a time, so that a reader can stream a model.
func (c Config) FromHFVariable(path string, hf map[string][]float32) ([]float32, error) {
	v, ok := c.variable(path)
	if !ok {
		return nil, fmt.Errorf("model: from hf: unknown variable %q", path)
	}
	parts, err := c.hfParts(v.Path)
	if err != nil {
		return nil, err
	}
	data := make([]float32, v.Size())
	for _, p := range parts {
		src, ok := hf[p.name]
		var shape []int
		switch {
		case len(v.Shape) == 1:
			shape = []int{p.hi - p.lo}
		case p.transpose:
			shape = []int{p.hi - p.lo, v.Shape[0]}
		default:
			shape = v.Shape
		}
		want := 1
		for _, d := range shape {
			want *= d
		}
		if !ok || len(src) != want {
			return nil, fmt.Errorf("model: from hf: tensor %q missing or not of shape %v", p.name, shape)
		}
		switch {
		case len(v.Shape) == 1:
			copy(data[p.lo:p.hi], src)
		case p.transpose:
			in, cols := v.Shape[0], v.Shape[1]
			for o := p.lo; o < p.hi; o++ {
				for i := range in {
					data[i*cols+o] = src[(o-p.lo)*in+i]
				}
			}
		default:
			copy(data, src)
		}
	}
	return data, nil
}

// WithHeads returns c with the heads that a weights file holds besides the causal LM (config.json
// describes the LM only): ValueHead when it has score.weight, RewardLogProb when it also has
// score.logprob_weight. has reports whether the file holds a tensor of that name.
func (c Config) WithHeads(has func(name string) bool) Config {
	c.ValueHead = has(hfScoreW)
	c.RewardLogProb = c.ValueHead && has(hfScoreLP)
	return c
}
