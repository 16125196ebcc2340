package model

import (
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"math"
)

// The configuration (fields, families, presets, validation) lives in modelcfg, which imports no
// GoMLX so that workflows can carry it. Config here is the same struct as a defined type, so the
// model's methods (weights, FLOPs, Hugging Face names) hang on it; convert with model.Config(c).
type Config modelcfg.Config

// Validate checks every field and names the first bad one with its allowed values.
func (c Config) Validate() error { return modelcfg.Config(c).Validate() }

// Sliding reports whether layer l is a sliding-window layer.
func (c Config) Sliding(l int) bool { return modelcfg.Config(c).Sliding(l) }

// Clone returns c with its pointer and slice fields copied.
func (c Config) Clone() Config { return Config(modelcfg.Config(c).Clone()) }

// Presets returns the names accepted by Preset, sorted.
func Presets() []string { return modelcfg.Presets() }

// Preset returns a named configuration (see modelcfg.Preset).
func Preset(name string) (Config, error) {
	c, err := modelcfg.Preset(name)
	return Config(c), err
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
	if c.AttnOutBias {
		perLayer += d
	}
	if c.QKNorm {
		perLayer += 2 * int64(c.HeadDim)
	}
	if c.PostNorms {
		perLayer += 2 * d
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

// rotaryDim is the number of features of each head that RoPE rotates.
func (c Config) rotaryDim() int {
	if c.RotaryDim > 0 {
		return c.RotaryDim
	}
	return c.HeadDim
}

// ropeInvFreq returns the RoPE inverse frequencies [rotary_dim/2] of the full-attention layers, with
// the configured rescaling applied (the same formulas as transformers' _compute_llama3_parameters
// and _compute_linear_scaling_rope_parameters).
func (c Config) ropeInvFreq() []float64 { return c.ropeInvFreqFor(false) }

// ropeInvFreqFor is ropeInvFreq for sliding layers when local is set: plain RoPE with base
// RopeLocalTheta if that is set (Gemma 3), else the full layers' frequencies.
func (c Config) ropeInvFreqFor(local bool) []float64 {
	dim := c.rotaryDim()
	theta := c.RopeTheta
	s := c.RopeScaling
	if local && c.RopeLocalTheta > 0 {
		theta, s = c.RopeLocalTheta, nil
	}
	inv := make([]float64, dim/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(theta, float64(2*i)/float64(dim))
	}
	if s == nil {
		return inv
	}
	if s.Type == modelcfg.RopeLinear {
		for i := range inv {
			inv[i] /= s.Factor
		}
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
