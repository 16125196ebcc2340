package modelcfg

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// Family names: they decide the Hugging Face architecture name and the defaults of FromHFConfig.
const (
	FamilyLlama   = "llama"
	FamilyGemma   = "gemma"
	FamilyQwen2   = "qwen2"
	FamilyGemma2  = "gemma2"
	FamilyGemma3  = "gemma3_text"
	FamilyQwen3   = "qwen3"
	FamilyMistral = "mistral"
	FamilyPhi3    = "phi3"
)

// Attention kinds of Config.LayerTypes, as transformers names them in config.json "layer_types".
const (
	LayerFull    = "full_attention"
	LayerSliding = "sliding_attention"
)

// RoPE scaling types (RopeScaling.Type).
const (
	RopeLlama3 = "llama3"
	RopeLinear = "linear"
)

// Activation names for the gated MLP: silu → SwiGLU; gelu → GeGLU with the tanh approximation
// (what Gemma's "gelu_pytorch_tanh" computes); gelu_exact → GeGLU with the erf GELU.
const (
	ActSiLU      = "silu"
	ActGELU      = "gelu"
	ActGELUExact = "gelu_exact"
)

// Execution choices (Config.Attention, Config.Remat): how a graph computes, not what.
const (
	AttentionAuto    = "auto"
	AttentionPlain   = "plain"
	AttentionBlocked = "blocked"
	RematNone        = "none"
	RematLayer       = "layer"
	RematAttention   = "attention"
)

// DefaultVocab is the vocabulary of the trainable presets: the byte tokenizer's 256 bytes, PAD, BOS, EOS and
// five reserved ids (tokenize.ByteVocabSize; a multiple of 8).
const DefaultVocab = 264

var (
	families    = []string{FamilyLlama, FamilyGemma, FamilyQwen2, FamilyGemma2, FamilyGemma3, FamilyQwen3, FamilyMistral, FamilyPhi3}
	layerTypes  = []string{LayerFull, LayerSliding}
	ropeTypes   = []string{RopeLlama3, RopeLinear}
	activations = []string{ActSiLU, ActGELU, ActGELUExact}
	attentions  = []string{AttentionAuto, AttentionPlain, AttentionBlocked}
	remats      = []string{RematNone, RematLayer, RematAttention}
)

// RopeScaling is the optional RoPE frequency rescaling (config.json "rope_scaling"): "llama3" (Llama
// 3.1/3.2: factor, low/high_freq_factor, original_max_position_embeddings) or "linear" (Gemma 3's
// global layers: every frequency divided by factor; the other fields stay zero).
type RopeScaling struct {
	Type                 string  `json:"rope_type"` // "llama3" | "linear"
	Factor               float64 `json:"factor"`
	LowFreqFactor        float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor       float64 `json:"high_freq_factor,omitempty"`
	OriginalMaxPositions int     `json:"original_max_position_embeddings,omitempty"`
}

// Config describes a decoder-only transformer of the Llama, Gemma (1, 2, 3), Qwen (2, 3), Mistral and
// Phi-3 families.
// All fields are explicit (the family only names the architecture); the presets and FromHFConfig
// fill them per family.
type Config struct {
	Family  string `json:"family"`   // see Families
	Vocab   int    `json:"vocab"`    // vocabulary size
	DModel  int    `json:"d_model"`  // hidden size
	Layers  int    `json:"layers"`   // decoder blocks
	Heads   int    `json:"heads"`    // query heads
	KVHeads int    `json:"kv_heads"` // key/value heads (GQA); must divide Heads
	HeadDim int    `json:"head_dim"` // per-head size; even (RoPE rotates pairs)
	FFN     int    `json:"ffn"`      // MLP hidden size (per branch of the gated MLP)
	MaxSeq  int    `json:"max_seq"`  // longest sequence (prompt + completion) accepted

	RopeTheta   float64      `json:"rope_theta"`             // RoPE base, e.g. 10000
	RopeScaling *RopeScaling `json:"rope_scaling,omitempty"` // nil: plain RoPE
	NormEps     float64      `json:"norm_eps"`               // RMSNorm epsilon
	Activation  string       `json:"activation"`             // "silu" | "gelu" | "gelu_exact"

	TiedEmbeddings  bool `json:"tied_embeddings"`  // lm head = embedding matrix (no lm_head weight)
	ScaleEmbeddings bool `json:"scale_embeddings"` // multiply embeddings by sqrt(d_model) (Gemma)
	NormPlusOne     bool `json:"norm_plus_one"`    // RMSNorm scales by (1+w) (Gemma); weights start at 0
	QKVBias         bool `json:"qkv_bias"`         // biases on q/k/v projections (Qwen2)

	// The features below belong to the newer families (Gemma 2/3, Qwen3, Mistral, Phi-3). Each is
	// off at its zero value, so older configs (and their JSON, hence their config hashes) read as
	// before, and a graph built without them has exactly the ops it had before they existed.

	AttnOutBias bool `json:"attn_out_bias,omitempty"` // bias on the attention output projection (attention_bias)
	QKNorm      bool `json:"qk_norm,omitempty"`       // per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3)
	PostNorms   bool `json:"post_norms,omitempty"`    // RMSNorm of the attention and MLP outputs before each residual add (Gemma 2/3)
	// QueryScale replaces head_dim in the attention scale 1/√head_dim (query_pre_attn_scalar); 0: head_dim.
	QueryScale float64 `json:"query_scale,omitempty"`
	// AttnSoftcap and FinalSoftcap cap attention scores and output logits as cap·tanh(x/cap); 0: none.
	AttnSoftcap  float64 `json:"attn_softcap,omitempty"`
	FinalSoftcap float64 `json:"final_softcap,omitempty"`
	// SlidingWindow: a query of a sliding layer sees the SlidingWindow most recent keys (itself
	// included); 0: no sliding layers. LayerTypes then names each layer's kind ("full_attention" or
	// "sliding_attention", as config.json's layer_types) and must have one entry per layer.
	SlidingWindow int      `json:"sliding_window,omitempty"`
	LayerTypes    []string `json:"layer_types,omitempty"`
	// RopeLocalTheta is the RoPE base of the sliding layers, which then use plain RoPE (Gemma 3's
	// rope_local_base_freq); 0: sliding layers use the same RoPE as full ones.
	RopeLocalTheta float64 `json:"rope_local_theta,omitempty"`
	// RotaryDim rotates only the first RotaryDim features of each head (Phi-3's
	// partial_rotary_factor·head_dim); 0: all of them.
	RotaryDim int `json:"rotary_dim,omitempty"`

	// ValueHead adds a scalar head (value_head/w [d,1], value_head/b [1]) on the final hidden state,
	// for reward models and PPO critics; it shares the trunk. See Values.
	ValueHead bool `json:"value_head,omitempty"`
	// RewardLogProb (with ValueHead) makes a reward model's sequence reward generative as well:
	// r = value(last token) + α·Σ log π(completion tokens | prefix), α a learned scalar
	// (value_head/logprob [1]). The LM head then scores each token of the completion against what
	// the model predicts there, which a head reading one position cannot do cheaply (see
	// objective.SequenceRewards).
	RewardLogProb bool `json:"reward_logprob,omitempty"`

	// Attention and Remat choose how training, scoring and prefill compute, not what: they are not
	// part of config.json, and empty (the default) leaves the JSON, hence config hashes, as before.
	//
	// Attention: "auto" (or empty) computes [seq × seq] scores below BlockedAttentionMinSeq tokens
	// and blocked (flash-style) attention from there on, on the Go backend; "plain" always the
	// former; "blocked" always the latter (Go backend only). The two agree to float32 rounding.
	// Cached decoding on the Go backend attends with the fork's fused decode kernel unless it is
	// "plain" (model.decodeFused), which keeps the plain graph there too.
	Attention string `json:"attention,omitempty"`
	// Remat recomputes activations in the backward pass instead of keeping them from the forward:
	// "none" keeps everything; "layer" keeps each decoder block's input and recomputes the block;
	// "attention" does that for the attention sub-block only (its scores, or its projections and
	// rotations when attention is blocked). Results are bit-identical to "none". Empty: "none",
	// unless the runtime's memory budget (tpu.Options.MemoryBudget) asks for "layer".
	Remat string `json:"remat,omitempty"`
}

// BlockedAttentionMinSeq is the sequence length from which Attention "auto" uses blocked
// attention: below it the [seq × seq] scores are small and the plain path is as fast or faster
// (docs/engine-memory.md), and the presets' demo lengths keep their exact numbers.
const BlockedAttentionMinSeq = 1024

// Validate checks every field and names the first bad one with its allowed values.
func (c Config) Validate() error {
	pos := func(name string, v int) error {
		if v <= 0 {
			return fmt.Errorf("model: config %s=%d: must be > 0", name, v)
		}
		return nil
	}
	if !slices.Contains(families, c.Family) {
		return fmt.Errorf("model: config family=%q: allowed %q", c.Family, families)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab", c.Vocab}, {"d_model", c.DModel}, {"layers", c.Layers}, {"heads", c.Heads},
		{"kv_heads", c.KVHeads}, {"head_dim", c.HeadDim}, {"ffn", c.FFN}, {"max_seq", c.MaxSeq}} {
		if err := pos(f.name, f.v); err != nil {
			return err
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("model: config kv_heads=%d: must divide heads=%d", c.KVHeads, c.Heads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("model: config head_dim=%d: must be even (RoPE)", c.HeadDim)
	}
	if !(c.RopeTheta > 0) {
		return fmt.Errorf("model: config rope_theta=%g: must be > 0", c.RopeTheta)
	}
	if !(c.NormEps > 0) {
		return fmt.Errorf("model: config norm_eps=%g: must be > 0", c.NormEps)
	}
	if !slices.Contains(activations, c.Activation) {
		return fmt.Errorf("model: config activation=%q: allowed %q", c.Activation, activations)
	}
	if s := c.RopeScaling; s != nil {
		switch s.Type {
		case RopeLlama3:
			if !(s.Factor > 0) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || s.OriginalMaxPositions <= 0 {
				return fmt.Errorf("model: config rope_scaling=%+v: need factor>0, 0<low_freq_factor<high_freq_factor, original_max_position_embeddings>0", *s)
			}
		case RopeLinear:
			if !(s.Factor > 0) || s.LowFreqFactor != 0 || s.HighFreqFactor != 0 || s.OriginalMaxPositions != 0 {
				return fmt.Errorf("model: config rope_scaling=%+v: linear needs factor>0 and no other field", *s)
			}
		default:
			return fmt.Errorf("model: config rope_scaling.rope_type=%q: allowed %q", s.Type, ropeTypes)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"query_scale", c.QueryScale}, {"attn_softcap", c.AttnSoftcap}, {"final_softcap", c.FinalSoftcap},
		{"rope_local_theta", c.RopeLocalTheta}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("model: config %s=%g: must be finite and >= 0 (0: off)", f.name, f.v)
		}
	}
	if c.RotaryDim < 0 || c.RotaryDim > c.HeadDim || c.RotaryDim%2 != 0 {
		return fmt.Errorf("model: config rotary_dim=%d: must be even and in [0, head_dim=%d] (0: head_dim)", c.RotaryDim, c.HeadDim)
	}
	switch {
	case c.SlidingWindow < 0:
		return fmt.Errorf("model: config sliding_window=%d: must be >= 0 (0: no sliding layers)", c.SlidingWindow)
	case c.SlidingWindow == 0 && len(c.LayerTypes) > 0:
		return fmt.Errorf("model: config layer_types=%q: needs sliding_window > 0", c.LayerTypes)
	case c.SlidingWindow > 0 && len(c.LayerTypes) != c.Layers:
		return fmt.Errorf("model: config layer_types has %d entries: want one per layer (%d) with sliding_window=%d", len(c.LayerTypes), c.Layers, c.SlidingWindow)
	}
	for i, t := range c.LayerTypes {
		if !slices.Contains(layerTypes, t) {
			return fmt.Errorf("model: config layer_types[%d]=%q: allowed %q", i, t, layerTypes)
		}
	}
	if c.RopeLocalTheta > 0 && c.SlidingWindow == 0 {
		return fmt.Errorf("model: config rope_local_theta=%g: needs sliding layers (sliding_window > 0)", c.RopeLocalTheta)
	}
	if c.RewardLogProb && !c.ValueHead {
		return fmt.Errorf("model: config reward_logprob=true needs value_head=true")
	}
	if c.Attention != "" && !slices.Contains(attentions, c.Attention) {
		return fmt.Errorf("model: config attention=%q: allowed %q (empty: auto)", c.Attention, attentions)
	}
	if c.Remat != "" && !slices.Contains(remats, c.Remat) {
		return fmt.Errorf("model: config remat=%q: allowed %q (empty: none unless the memory budget asks for layer)", c.Remat, remats)
	}
	return nil
}

// Presets returns the names accepted by Preset, sorted.
func Presets() []string { return slices.Sorted(maps.Keys(presets)) }

// Preset returns a named configuration. "tiny" (~0.1M params), "small" (~1M) and "base" (~10M) are
// llama-style models for the 264-token byte vocabulary (override Vocab freely); "gemma-2b",
// "llama-3.2-1b" and "qwen2.5-0.5b" are the real shapes of those checkpoints (for loading, not for
// training on this machine).
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("model: preset %q: allowed %q", name, Presets())
	}
	return c.Clone(), nil
}

// Families returns the family names a Config may have.
func Families() []string { return slices.Clone(families) }

// Clone returns c with its pointer and slice fields copied, so that changing the copy's
// RopeScaling or LayerTypes leaves c alone.
func (c Config) Clone() Config {
	if c.RopeScaling != nil {
		s := *c.RopeScaling
		c.RopeScaling = &s
	}
	c.LayerTypes = slices.Clone(c.LayerTypes)
	return c
}

// Sliding reports whether layer l is a sliding-window layer.
func (c Config) Sliding(l int) bool {
	return c.SlidingWindow > 0 && l < len(c.LayerTypes) && c.LayerTypes[l] == LayerSliding
}

func llamaStyle(d, layers, heads, kv, hd, ffn int) Config {
	return Config{Family: FamilyLlama, Vocab: DefaultVocab, DModel: d, Layers: layers, Heads: heads,
		KVHeads: kv, HeadDim: hd, FFN: ffn, MaxSeq: 512, RopeTheta: 10000, NormEps: 1e-5,
		Activation: ActSiLU, TiedEmbeddings: true}
}

var presets = map[string]Config{
	"tiny":  llamaStyle(64, 2, 4, 2, 16, 128),
	"small": llamaStyle(128, 5, 4, 2, 32, 384),
	"base":  llamaStyle(384, 6, 6, 2, 64, 1024),
	"gemma-2b": {Family: FamilyGemma, Vocab: 256000, DModel: 2048, Layers: 18, Heads: 8, KVHeads: 1,
		HeadDim: 256, FFN: 16384, MaxSeq: 8192, RopeTheta: 10000, NormEps: 1e-6, Activation: ActGELU,
		TiedEmbeddings: true, ScaleEmbeddings: true, NormPlusOne: true},
	"llama-3.2-1b": {Family: FamilyLlama, Vocab: 128256, DModel: 2048, Layers: 16, Heads: 32, KVHeads: 8,
		HeadDim: 64, FFN: 8192, MaxSeq: 131072, RopeTheta: 500000, NormEps: 1e-5, Activation: ActSiLU,
		TiedEmbeddings: true, RopeScaling: &RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1,
			HighFreqFactor: 4, OriginalMaxPositions: 8192}},
	"qwen2.5-0.5b": {Family: FamilyQwen2, Vocab: 151936, DModel: 896, Layers: 24, Heads: 14, KVHeads: 2,
		HeadDim: 64, FFN: 4864, MaxSeq: 32768, RopeTheta: 1000000, NormEps: 1e-6, Activation: ActSiLU,
		TiedEmbeddings: true, QKVBias: true},
}
