package visioncfg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// Activations of the MLPs (Temper's names; FromHFConfig maps transformers' hidden_act onto them).
const (
	ActGELU      = "gelu"       // tanh approximation: transformers' gelu_pytorch_tanh and gelu_new
	ActGELUExact = "gelu_exact" // erf form: transformers' gelu
	ActQuickGELU = "quick_gelu" // x·sigmoid(1.702·x)
)

var activations = []string{ActGELU, ActGELUExact, ActQuickGELU}

// Config is a SigLIP vision tower: patch embedding (a linear map of each patch_size² patch),
// learned position embeddings, pre-norm encoder layers (LayerNorm, multi-head attention with
// biases, an MLP), a final LayerNorm, and optionally the multi-head attention pooling head.
type Config struct {
	DModel     int     `json:"d_model"`    // hidden_size
	Layers     int     `json:"layers"`     // num_hidden_layers
	Heads      int     `json:"heads"`      // num_attention_heads; must divide d_model
	FFN        int     `json:"ffn"`        // intermediate_size
	Channels   int     `json:"channels"`   // num_channels (3 for RGB)
	ImageSize  int     `json:"image_size"` // input images are image_size × image_size
	PatchSize  int     `json:"patch_size"` // patches of patch_size × patch_size pixels, without overlap
	Activation string  `json:"activation"` // see the Act constants
	NormEps    float64 `json:"norm_eps"`   // layer_norm_eps
	// UseHead adds transformers' SiglipMultiheadAttentionPoolingHead (vision_use_head, default
	// true there): the pooled output is its result. Without it the pooled output is the mean of
	// the patch outputs (transformers returns no pooled output then).
	UseHead bool `json:"use_head"`
}

// Grid is the number of patches along each side (the convolution ignores leftover pixels).
func (c Config) Grid() int { return c.ImageSize / c.PatchSize }

// Patches is the number of patches per image.
func (c Config) Patches() int { return c.Grid() * c.Grid() }

// HeadDim is the size of one attention head.
func (c Config) HeadDim() int { return c.DModel / c.Heads }

// PatchDim is the length of one flattened patch: channels × patch_size².
func (c Config) PatchDim() int { return c.Channels * c.PatchSize * c.PatchSize }

// Validate checks every field and names the first bad one with its allowed values.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"d_model", c.DModel}, {"layers", c.Layers}, {"heads", c.Heads}, {"ffn", c.FFN}, {"channels", c.Channels},
		{"image_size", c.ImageSize}, {"patch_size", c.PatchSize}} {
		if f.v <= 0 {
			return fmt.Errorf("vision: config %s=%d: must be > 0", f.name, f.v)
		}
	}
	if c.DModel%c.Heads != 0 {
		return fmt.Errorf("vision: config heads=%d: must divide d_model=%d", c.Heads, c.DModel)
	}
	if c.PatchSize > c.ImageSize {
		return fmt.Errorf("vision: config patch_size=%d: must be <= image_size=%d", c.PatchSize, c.ImageSize)
	}
	if !slices.Contains(activations, c.Activation) {
		return fmt.Errorf("vision: config activation=%q: allowed %q", c.Activation, activations)
	}
	if math.IsNaN(c.NormEps) || math.IsInf(c.NormEps, 0) || c.NormEps <= 0 {
		return fmt.Errorf("vision: config norm_eps=%g: must be a finite value > 0", c.NormEps)
	}
	return nil
}

// ParamCount is the number of parameters.
func (c Config) ParamCount() int64 {
	d, f := int64(c.DModel), int64(c.FFN)
	layer := 4*(d*d+d) + 2*d*f + f + d + 4*d // attention, MLP, two LayerNorms
	n := int64(c.PatchDim())*d + d + int64(c.Patches())*d + int64(c.Layers)*layer + 2*d
	if c.UseHead {
		n += d + 3*d*d + 3*d + d*d + d + 2*d + 2*d*f + f + d
	}
	return n
}

// ForwardFLOPsPerImage estimates one image's forward FLOPs: 2 per multiply-add of the patch
// embedding, the encoder's projections and MLPs, and its attention (scores and weighted sum over
// all patches), plus the head's.
func (c Config) ForwardFLOPsPerImage() float64 {
	d, f, p := float64(c.DModel), float64(c.FFN), float64(c.Patches())
	layer := p * (4*d*d + 2*d*f + 2*p*d)
	flops := 2 * (p*float64(c.PatchDim())*d + float64(c.Layers)*layer)
	if c.UseHead {
		flops += 2 * (d*d + 2*p*d*d + 2*p*d + d*d + 2*d*f)
	}
	return flops
}

var presets = map[string]Config{
	// Trials on this machine: 16 patches of 8×8 pixels of a 32×32 image.
	"tiny": {DModel: 64, Layers: 2, Heads: 4, FFN: 128, Channels: 3, ImageSize: 32, PatchSize: 8,
		Activation: ActGELU, NormEps: 1e-6, UseHead: true},
	// 64 patches of a 64×64 image.
	"small": {DModel: 128, Layers: 4, Heads: 4, FFN: 256, Channels: 3, ImageSize: 64, PatchSize: 8,
		Activation: ActGELU, NormEps: 1e-6, UseHead: true},
	// The real towers, for loading checkpoints.
	"siglip-base-patch16-224": {DModel: 768, Layers: 12, Heads: 12, FFN: 3072, Channels: 3, ImageSize: 224,
		PatchSize: 16, Activation: ActGELU, NormEps: 1e-6, UseHead: true},
	"siglip-so400m-patch14-384": {DModel: 1152, Layers: 27, Heads: 16, FFN: 4304, Channels: 3, ImageSize: 384,
		PatchSize: 14, Activation: ActGELU, NormEps: 1e-6, UseHead: true},
}

// Presets returns the names accepted by Preset, sorted.
func Presets() []string { return slices.Sorted(maps.Keys(presets)) }

// Preset returns a named configuration: "tiny" and "small" for trials, and the shapes of
// google/siglip-base-patch16-224 and google/siglip-so400m-patch14-384.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("vision: preset %q: allowed %q", name, Presets())
	}
	return c, nil
}

// Model types FromHFConfig reads.
const (
	ModelTypeVision = "siglip_vision_model"
	ModelTypeSiglip = "siglip"
)

// hfVisionRead are the SiglipVisionConfig fields Temper reads; hfVisionBookkeeping are accepted
// and not used (attention_dropout only when 0: it is training-time dropout Temper does not apply).
var (
	hfVisionRead = []string{"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
		"num_channels", "image_size", "patch_size", "hidden_act", "layer_norm_eps", "vision_use_head", "attention_dropout"}
	hfVisionBookkeeping = []string{"model_type", "architectures", "transformers_version", "torch_dtype", "dtype",
		"initializer_range", "initializer_factor", "projection_dim", "_name_or_path", "_attn_implementation_autoset",
		"attn_implementation", "output_attentions", "output_hidden_states", "return_dict", "use_return_dict",
		"id2label", "label2id", "problem_type"}
	hfSiglipTop = []string{"model_type", "architectures", "transformers_version", "torch_dtype", "dtype",
		"initializer_factor", "text_config", "vision_config", "_name_or_path", "projection_dim",
		"logit_scale_init_value", "output_attentions", "output_hidden_states", "return_dict"}
	hfActs = map[string]string{"gelu_pytorch_tanh": ActGELU, "gelu_new": ActGELU, "gelu": ActGELUExact,
		"quick_gelu": ActQuickGELU}
)

// FromHFConfig reads a config.json of model_type siglip_vision_model, or the vision_config of a
// siglip one. Fields left out take SiglipVisionConfig's defaults (hidden_size 768, 12 layers and
// heads, intermediate_size 3072, image_size 224, patch_size 16, gelu_pytorch_tanh,
// layer_norm_eps 1e-6, vision_use_head true). Unknown fields are refused by name.
func FromHFConfig(data []byte) (Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return Config{}, fmt.Errorf("vision: config.json: %w", err)
	}
	var mt string
	if v, ok := top["model_type"]; ok {
		_ = json.Unmarshal(v, &mt)
	}
	section := "config.json"
	switch mt {
	case ModelTypeSiglip:
		if err := onlyKnown(top, section, hfSiglipTop); err != nil {
			return Config{}, err
		}
		vc, ok := top["vision_config"]
		if !ok || bytes.Equal(bytes.TrimSpace(vc), []byte("null")) {
			vc = []byte("{}") // transformers builds the default vision config
		}
		top = nil
		if err := json.Unmarshal(vc, &top); err != nil {
			return Config{}, fmt.Errorf("vision: config.json vision_config: %w", err)
		}
		section = "config.json vision_config"
		if v, ok := top["model_type"]; ok {
			mt = ""
			_ = json.Unmarshal(v, &mt)
			if mt != ModelTypeVision {
				return Config{}, fmt.Errorf("vision: %s: model_type=%q: want %q", section, mt, ModelTypeVision)
			}
		}
	case ModelTypeVision:
	default:
		return Config{}, fmt.Errorf("vision: config.json: model_type=%q: allowed %q, %q (the vision_config of a siglip model)", mt, ModelTypeVision, ModelTypeSiglip)
	}
	if err := onlyKnown(top, section, append(slices.Clone(hfVisionRead), hfVisionBookkeeping...)); err != nil {
		return Config{}, err
	}
	hf := struct {
		HiddenSize       int      `json:"hidden_size"`
		IntermediateSize int      `json:"intermediate_size"`
		Layers           int      `json:"num_hidden_layers"`
		Heads            int      `json:"num_attention_heads"`
		Channels         int      `json:"num_channels"`
		ImageSize        int      `json:"image_size"`
		PatchSize        int      `json:"patch_size"`
		Act              string   `json:"hidden_act"`
		Eps              float64  `json:"layer_norm_eps"`
		UseHead          *bool    `json:"vision_use_head"`
		Dropout          *float64 `json:"attention_dropout"`
	}{HiddenSize: 768, IntermediateSize: 3072, Layers: 12, Heads: 12, Channels: 3, ImageSize: 224, PatchSize: 16,
		Act: "gelu_pytorch_tanh", Eps: 1e-6}
	raw, _ := json.Marshal(top)
	if err := json.Unmarshal(raw, &hf); err != nil {
		return Config{}, fmt.Errorf("vision: %s: %w", section, err)
	}
	if hf.Dropout != nil && *hf.Dropout != 0 {
		return Config{}, fmt.Errorf("vision: %s: attention_dropout=%g: only 0 is implemented", section, *hf.Dropout)
	}
	act, ok := hfActs[hf.Act]
	if !ok {
		known := make([]string, 0, len(hfActs))
		for k := range hfActs {
			known = append(known, k)
		}
		sort.Strings(known)
		return Config{}, fmt.Errorf("vision: %s: hidden_act=%q: allowed %q", section, hf.Act, known)
	}
	c := Config{DModel: hf.HiddenSize, Layers: hf.Layers, Heads: hf.Heads, FFN: hf.IntermediateSize,
		Channels: hf.Channels, ImageSize: hf.ImageSize, PatchSize: hf.PatchSize, Activation: act,
		NormEps: hf.Eps, UseHead: hf.UseHead == nil || *hf.UseHead}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func onlyKnown(m map[string]json.RawMessage, section string, known []string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return fmt.Errorf("vision: %s: field %q is not implemented (read: %s)", section, k, strings.Join(hfVisionRead, ", "))
		}
	}
	return nil
}

// ToHFConfig writes the config.json of a SiglipVisionModel with c's tower (hidden_act
// gelu_pytorch_tanh, gelu or quick_gelu), which FromHFConfig reads back to c.
func ToHFConfig(c Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	act := map[string]string{ActGELU: "gelu_pytorch_tanh", ActGELUExact: "gelu", ActQuickGELU: "quick_gelu"}[c.Activation]
	out := map[string]any{
		"architectures": []string{"SiglipVisionModel"}, "model_type": ModelTypeVision,
		"hidden_size": c.DModel, "intermediate_size": c.FFN, "num_hidden_layers": c.Layers,
		"num_attention_heads": c.Heads, "num_channels": c.Channels, "image_size": c.ImageSize,
		"patch_size": c.PatchSize, "hidden_act": act, "layer_norm_eps": c.NormEps,
		"vision_use_head": c.UseHead, "attention_dropout": 0.0, "torch_dtype": "float32",
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// LoRA targets: the linear modules of the encoder layers, by their Hugging Face names.
var loraTargets = []string{"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"}

// LoRATargets returns the module names LoRA.Targets may list, plus "all-linear".
func LoRATargets() []string { return append(slices.Clone(loraTargets), "all-linear") }

// LoRA configures low-rank adapters on the encoder layers' linear modules (the patch embedding
// and the pooling head are trained in full or frozen, not adapted): W·x + (alpha/rank)·B·A·x.
type LoRA struct {
	Rank    int      `json:"rank"`              // default 8
	Alpha   float64  `json:"alpha,omitempty"`   // default 2·rank
	Targets []string `json:"targets,omitempty"` // default all-linear
}

// WithDefaults fills the zero fields.
func (l LoRA) WithDefaults() LoRA {
	if l.Rank == 0 {
		l.Rank = 8
	}
	if l.Alpha == 0 {
		l.Alpha = 2 * float64(l.Rank)
	}
	if len(l.Targets) == 0 {
		l.Targets = []string{"all-linear"}
	}
	return l
}

// Scale is alpha/rank.
func (l LoRA) Scale() float64 { return l.Alpha / float64(l.Rank) }

// Validate checks the fields (after defaults).
func (l LoRA) Validate() error {
	if l.Rank <= 0 {
		return fmt.Errorf("vision: lora rank=%d: must be > 0", l.Rank)
	}
	if math.IsNaN(l.Alpha) || math.IsInf(l.Alpha, 0) || l.Alpha <= 0 {
		return fmt.Errorf("vision: lora alpha=%g: must be a finite value > 0", l.Alpha)
	}
	for _, t := range l.Targets {
		if !slices.Contains(LoRATargets(), t) {
			return fmt.Errorf("vision: lora targets: %q: allowed %q", t, LoRATargets())
		}
	}
	return nil
}

// Selects reports whether the adapters target module short (q_proj, …, fc2).
func (l LoRA) Selects(short string) bool {
	return slices.Contains(l.Targets, "all-linear") || slices.Contains(l.Targets, short)
}
