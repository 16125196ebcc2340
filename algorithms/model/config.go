package model

import (
	"fmt"
	"math"
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

// qkvWidth is the output width of the fused QKV projection.
func (c Config) qkvWidth() int { return (c.Heads + 2*c.KVHeads) * c.HeadDim }

// ParamCount is the number of trainable parameters (embedding counted once when tied; the value
// head included when ValueHead is set).
func (c Config) ParamCount() int64 {
	d := int64(c.DModel)
	perLayer := d*int64(c.qkvWidth()) + int64(c.Heads*c.HeadDim)*d + 3*d*int64(c.FFN) + 2*d
	if c.QKVBias {
		perLayer += int64(c.qkvWidth())
	}
	n := int64(c.Layers)*perLayer + int64(c.Vocab)*d + d
	if !c.TiedEmbeddings {
		n += int64(c.Vocab) * d
	}
	if c.ValueHead {
		n += d + 1
		if c.RewardLogProb {
			n++
		}
	}
	return n
}

// matmulParams is the number of parameters that take part in a matmul per token (everything but
// norms, biases and the embedding lookup; the output head counts, tied or not).
func (c Config) matmulParams() int64 {
	d := int64(c.DModel)
	perLayer := d*int64(c.qkvWidth()) + int64(c.Heads*c.HeadDim)*d + 3*d*int64(c.FFN)
	return int64(c.Layers)*perLayer + int64(c.Vocab)*d
}

// ForwardFLOPsPerToken estimates forward FLOPs for one token at context length seq:
// 2·(matmul params) + attention 2·2·layers·heads·head_dim·seq (scores and weighted sum, causal
// attention averages seq/2 keys, so pass the mean context length for a full sequence).
func (c Config) ForwardFLOPsPerToken(seq int) float64 {
	attn := 4 * float64(c.Layers) * float64(c.Heads*c.HeadDim) * float64(seq)
	return 2*float64(c.matmulParams()) + attn
}

// TrainFLOPsPerToken estimates training FLOPs per token (forward + backward = 3× forward) for
// sequences of length seq: 6·N + 6·layers·heads·head_dim·seq, where N counts the parameters in
// matmuls (the output head included, the embedding lookup not) and causal attention sees seq/2
// keys on average. Use it for MFU: tokens/s × TrainFLOPsPerToken / peak FLOP/s.
func (c Config) TrainFLOPsPerToken(seq int) float64 {
	return 6*float64(c.matmulParams()) + 6*float64(c.Layers)*float64(c.Heads*c.HeadDim)*float64(seq)
}

// ropeInvFreq returns the RoPE inverse frequencies [head_dim/2], with the llama3 rescaling applied
// when configured (the same formula as transformers' _compute_llama3_parameters).
func (c Config) ropeInvFreq() []float64 {
	half := c.HeadDim / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(c.HeadDim))
	}
	s := c.RopeScaling
	if s == nil {
		return inv
	}
	lowWavelen := float64(s.OriginalMaxPositions) / s.LowFreqFactor
	highWavelen := float64(s.OriginalMaxPositions) / s.HighFreqFactor
	for i, f := range inv {
		wavelen := 2 * math.Pi / f
		switch {
		case wavelen > lowWavelen:
			inv[i] = f / s.Factor
		case wavelen < highWavelen:
			// unchanged
		default:
			smooth := (float64(s.OriginalMaxPositions)/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			inv[i] = (1-smooth)*f/s.Factor + smooth*f
		}
	}
	return inv
}
