package modelcfg

import (
	"fmt"
	"slices"
	"sort"
)

// Family names: they decide the Hugging Face architecture name and the defaults of FromHFConfig.
const (
	FamilyLlama = "llama"
	FamilyGemma = "gemma"
	FamilyQwen2 = "qwen2"
)

// Activation names for the gated MLP: silu → SwiGLU; gelu → GeGLU with the tanh approximation
// (what Gemma's "gelu_pytorch_tanh" computes); gelu_exact → GeGLU with the erf GELU.
const (
	ActSiLU      = "silu"
	ActGELU      = "gelu"
	ActGELUExact = "gelu_exact"
)

// DefaultVocab is the vocabulary of the trainable presets: the byte tokenizer's 256 bytes, PAD, BOS, EOS and
// five reserved ids (tokenize.ByteVocabSize; a multiple of 8).
const DefaultVocab = 264

var (
	families    = []string{FamilyLlama, FamilyGemma, FamilyQwen2}
	activations = []string{ActSiLU, ActGELU, ActGELUExact}
)

// RopeScaling is the optional "llama3" frequency rescaling of Llama 3.1/3.2 (config.json "rope_scaling").
type RopeScaling struct {
	Type                 string  `json:"rope_type"` // only "llama3"
	Factor               float64 `json:"factor"`
	LowFreqFactor        float64 `json:"low_freq_factor"`
	HighFreqFactor       float64 `json:"high_freq_factor"`
	OriginalMaxPositions int     `json:"original_max_position_embeddings"`
}

// Config describes a decoder-only transformer of the Llama / Gemma / Qwen2 families.
// All fields are explicit (the family only names the architecture); the presets and FromHFConfig
// fill them per family.
type Config struct {
	Family  string `json:"family"`   // "llama" | "gemma" | "qwen2"
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

	// ValueHead adds a scalar head (value_head/w [d,1], value_head/b [1]) on the final hidden state,
	// for reward models and PPO critics; it shares the trunk. See Values.
	ValueHead bool `json:"value_head,omitempty"`
	// RewardLogProb (with ValueHead) makes a reward model's sequence reward generative as well:
	// r = value(last token) + α·Σ log π(completion tokens | prefix), α a learned scalar
	// (value_head/logprob [1]). The LM head then scores each token of the completion against what
	// the model predicts there, which a head reading one position cannot do cheaply (see
	// objective.SequenceRewards).
	RewardLogProb bool `json:"reward_logprob,omitempty"`
}

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
		if s.Type != "llama3" {
			return fmt.Errorf("model: config rope_scaling.rope_type=%q: allowed [\"llama3\"]", s.Type)
		}
		if !(s.Factor > 0) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || s.OriginalMaxPositions <= 0 {
			return fmt.Errorf("model: config rope_scaling=%+v: need factor>0, 0<low_freq_factor<high_freq_factor, original_max_position_embeddings>0", *s)
		}
	}
	if c.RewardLogProb && !c.ValueHead {
		return fmt.Errorf("model: config reward_logprob=true needs value_head=true")
	}
	return nil
}

// Presets returns the names accepted by Preset, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns a named configuration. "tiny" (~0.1M params), "small" (~1M) and "base" (~10M) are
// llama-style models for the 264-token byte vocabulary (override Vocab freely); "gemma-2b",
// "llama-3.2-1b" and "qwen2.5-0.5b" are the real shapes of those checkpoints (for loading, not for
// training on this machine).
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("model: preset %q: allowed %q", name, Presets())
	}
	if c.RopeScaling != nil {
		s := *c.RopeScaling
		c.RopeScaling = &s
	}
	return c, nil
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
