package vision

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// Variable paths, relative to the scope the tower is built in. Linear weights are stored [in, out]
// (x·W), the transpose of Hugging Face's [out, in]; the patch embedding is a linear map of the
// flattened patch (channel, row, column), which is the convolution's weight [d, C, p, p] read as
// [d, C·p·p] and transposed.
const (
	VarPatch     = "embed/patch"      // [channels·patch², d]
	VarPatchBias = "embed/patch_bias" // [d]
	VarPosition  = "embed/position"   // [patches, d]

	VarLN1Scale = "layers/%d/ln1/scale" // [d]
	VarLN1Bias  = "layers/%d/ln1/bias"  // [d]
	VarQ        = "layers/%d/attn/q"    // [d, d]
	VarQBias    = "layers/%d/attn/q_bias"
	VarK        = "layers/%d/attn/k"
	VarKBias    = "layers/%d/attn/k_bias"
	VarV        = "layers/%d/attn/v"
	VarVBias    = "layers/%d/attn/v_bias"
	VarO        = "layers/%d/attn/o"
	VarOBias    = "layers/%d/attn/o_bias"
	VarLN2Scale = "layers/%d/ln2/scale"
	VarLN2Bias  = "layers/%d/ln2/bias"
	VarFC1      = "layers/%d/mlp/fc1"      // [d, ffn]
	VarFC1Bias  = "layers/%d/mlp/fc1_bias" // [ffn]
	VarFC2      = "layers/%d/mlp/fc2"      // [ffn, d]
	VarFC2Bias  = "layers/%d/mlp/fc2_bias" // [d]

	VarPostScale = "post_norm/scale" // [d]
	VarPostBias  = "post_norm/bias"

	VarProbe       = "head/probe"         // [d]
	VarHeadIn      = "head/attn/in"       // [d, 3d]: q | k | v columns (torch's in_proj_weight, transposed)
	VarHeadInBias  = "head/attn/in_bias"  // [3d]
	VarHeadOut     = "head/attn/out"      // [d, d]
	VarHeadOutBias = "head/attn/out_bias" // [d]
	VarHeadLNScale = "head/norm/scale"
	VarHeadLNBias  = "head/norm/bias"
	VarHeadFC1     = "head/mlp/fc1"
	VarHeadFC1Bias = "head/mlp/fc1_bias"
	VarHeadFC2     = "head/mlp/fc2"
	VarHeadFC2Bias = "head/mlp/fc2_bias"
)

// tensorSpec is one variable and its Hugging Face tensor.
type tensorSpec struct {
	Path      string
	Shape     []int  // ours
	HF        string // name without the prefix
	HFShape   []int
	Transpose bool // ours is [in, out], HF's [out, in]
}

func (t tensorSpec) size() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

func specs(c visioncfg.Config) []tensorSpec {
	d, f := c.DModel, c.FFN
	vec := func(path, hf string, n int) tensorSpec {
		return tensorSpec{Path: path, Shape: []int{n}, HF: hf, HFShape: []int{n}}
	}
	lin := func(path, hf string, in, out int) tensorSpec {
		return tensorSpec{Path: path, Shape: []int{in, out}, HF: hf, HFShape: []int{out, in}, Transpose: true}
	}
	out := []tensorSpec{
		{Path: VarPatch, Shape: []int{c.PatchDim(), d}, HF: "embeddings.patch_embedding.weight",
			HFShape: []int{d, c.Channels, c.PatchSize, c.PatchSize}, Transpose: true},
		vec(VarPatchBias, "embeddings.patch_embedding.bias", d),
		{Path: VarPosition, Shape: []int{c.Patches(), d}, HF: "embeddings.position_embedding.weight", HFShape: []int{c.Patches(), d}},
	}
	for l := range c.Layers {
		p := func(s string) string { return fmt.Sprintf(s, l) }
		h := fmt.Sprintf("encoder.layers.%d.", l)
		out = append(out,
			vec(p(VarLN1Scale), h+"layer_norm1.weight", d), vec(p(VarLN1Bias), h+"layer_norm1.bias", d),
			lin(p(VarQ), h+"self_attn.q_proj.weight", d, d), vec(p(VarQBias), h+"self_attn.q_proj.bias", d),
			lin(p(VarK), h+"self_attn.k_proj.weight", d, d), vec(p(VarKBias), h+"self_attn.k_proj.bias", d),
			lin(p(VarV), h+"self_attn.v_proj.weight", d, d), vec(p(VarVBias), h+"self_attn.v_proj.bias", d),
			lin(p(VarO), h+"self_attn.out_proj.weight", d, d), vec(p(VarOBias), h+"self_attn.out_proj.bias", d),
			vec(p(VarLN2Scale), h+"layer_norm2.weight", d), vec(p(VarLN2Bias), h+"layer_norm2.bias", d),
			lin(p(VarFC1), h+"mlp.fc1.weight", d, f), vec(p(VarFC1Bias), h+"mlp.fc1.bias", f),
			lin(p(VarFC2), h+"mlp.fc2.weight", f, d), vec(p(VarFC2Bias), h+"mlp.fc2.bias", d),
		)
	}
	out = append(out, vec(VarPostScale, "post_layernorm.weight", d), vec(VarPostBias, "post_layernorm.bias", d))
	if c.UseHead {
		out = append(out,
			tensorSpec{Path: VarProbe, Shape: []int{d}, HF: "head.probe", HFShape: []int{1, 1, d}},
			lin(VarHeadIn, "head.attention.in_proj_weight", d, 3*d), vec(VarHeadInBias, "head.attention.in_proj_bias", 3*d),
			lin(VarHeadOut, "head.attention.out_proj.weight", d, d), vec(VarHeadOutBias, "head.attention.out_proj.bias", d),
			vec(VarHeadLNScale, "head.layernorm.weight", d), vec(VarHeadLNBias, "head.layernorm.bias", d),
			lin(VarHeadFC1, "head.mlp.fc1.weight", d, f), vec(VarHeadFC1Bias, "head.mlp.fc1.bias", f),
			lin(VarHeadFC2, "head.mlp.fc2.weight", f, d), vec(VarHeadFC2Bias, "head.mlp.fc2.bias", d),
		)
	}
	return out
}

// Variables lists every variable of the tower, in a fixed order.
func Variables(c visioncfg.Config) []model.VarSpec {
	ss := specs(c)
	out := make([]model.VarSpec, len(ss))
	for i, s := range ss {
		out[i] = model.VarSpec{Path: s.Path, Shape: s.Shape}
	}
	return out
}

// InitWeights creates every variable of cfg under scope with deterministic random values from seed
// (plain Go, the same on any backend), scaled as transformers' SiglipPreTrainedModel._init_weights
// scales them: linear and patch weights ~ N(0, 1/fan_in) (its lecun normal, untruncated), position
// embeddings ~ N(0, 1/d), the probe ~ N(0, 1), biases 0, LayerNorm scales 1. Existing variables are
// overwritten.
func InitWeights(scope *gm.Scope, cfg visioncfg.Config, seed uint64) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x51911))
	w := make(map[string][]float32)
	for _, s := range specs(cfg) {
		data := make([]float32, s.size())
		std := 0.0
		switch {
		case strings.HasSuffix(s.Path, "/scale"):
			for i := range data {
				data[i] = 1
			}
		case strings.HasSuffix(s.Path, "bias"):
		case s.Path == VarPosition:
			std = 1 / math.Sqrt(float64(cfg.DModel))
		case s.Path == VarProbe:
			std = 1
		default:
			std = 1 / math.Sqrt(float64(s.Shape[0]))
		}
		if std > 0 {
			for i := range data {
				data[i] = float32(rng.NormFloat64() * std)
			}
		}
		w[s.Path] = data
	}
	return ImportWeights(scope, cfg, w)
}

// ImportWeights sets every variable of cfg under scope from w (internal paths → flat row-major
// float32 data), creating the variables as needed. A missing, extra or mis-sized entry is an error.
func ImportWeights(scope *gm.Scope, cfg visioncfg.Config, w map[string][]float32) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	return model.SetVariables(scope, "vision: import weights", Variables(cfg), w)
}

// ExportWeights copies every variable of cfg under scope to host memory.
func ExportWeights(scope *gm.Scope, cfg visioncfg.Config) (map[string][]float32, error) {
	return model.GetVariables(scope, "vision: export weights", Variables(cfg))
}
