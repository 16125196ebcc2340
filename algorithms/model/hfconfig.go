package model

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/temperml/temper/algorithms/model/modelcfg"
)

// hfFamily is what a model_type means in transformers: its architecture name and the defaults its
// configuration class gives the fields a config.json leaves out.
type hfFamily struct {
	arch      string
	tied      bool    // tie_word_embeddings
	theta     float64 // rope_theta
	eps       float64 // rms_norm_eps
	act       string  // the activation's default
	actKey    string  // "hidden_act" or "hidden_activation": the field the modeling code reads
	kvDefault int     // num_key_value_heads when absent; 0: num_attention_heads
	headDim   int     // head_dim when absent; 0: hidden_size / num_attention_heads
	window    int     // sliding_window when absent (0: none)
	gemma     bool    // scaled embeddings and (1+w) norms
	fields    []string
}

// Fields every family reads.
var hfCommonFields = []string{"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
	"num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps",
	"tie_word_embeddings", "rope_theta", "rope_scaling", "rope_parameters", "attention_dropout",
	"attn_implementation", "_attn_implementation"}

var hfFamilies = map[string]hfFamily{
	modelcfg.FamilyLlama: {arch: "LlamaForCausalLM", theta: 10000, eps: 1e-6, act: "silu", actKey: "hidden_act",
		fields: []string{"attention_bias", "mlp_bias"}},
	modelcfg.FamilyGemma: {arch: "GemmaForCausalLM", tied: true, theta: 10000, eps: 1e-6, act: "gelu_pytorch_tanh",
		actKey: "hidden_activation", gemma: true, fields: []string{"attention_bias", "hidden_act"}},
	modelcfg.FamilyQwen2: {arch: "Qwen2ForCausalLM", theta: 10000, eps: 1e-6, act: "silu", actKey: "hidden_act",
		fields: []string{"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}},
	modelcfg.FamilyQwen3: {arch: "Qwen3ForCausalLM", theta: 10000, eps: 1e-6, act: "silu", actKey: "hidden_act",
		kvDefault: 8, headDim: 128,
		fields: []string{"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}},
	modelcfg.FamilyMistral: {arch: "MistralForCausalLM", theta: 10000, eps: 1e-6, act: "silu", actKey: "hidden_act",
		kvDefault: 8, window: 4096, fields: []string{"sliding_window", "layer_types"}},
	modelcfg.FamilyPhi3: {arch: "Phi3ForCausalLM", theta: 10000, eps: 1e-5, act: "silu", actKey: "hidden_act",
		fields: []string{"sliding_window", "partial_rotary_factor", "resid_pdrop", "embd_pdrop",
			"original_max_position_embeddings", "layer_types"}},
	modelcfg.FamilyGemma2: {arch: "Gemma2ForCausalLM", tied: true, theta: 10000, eps: 1e-6, act: "gelu_pytorch_tanh",
		actKey: "hidden_activation", kvDefault: 4, headDim: 256, window: 4096, gemma: true,
		fields: []string{"attention_bias", "hidden_act", "query_pre_attn_scalar", "sliding_window", "layer_types",
			"attn_logit_softcapping", "final_logit_softcapping", "use_bidirectional_attention"}},
	modelcfg.FamilyGemma3: {arch: "Gemma3ForCausalLM", tied: true, theta: 1_000_000, eps: 1e-6, act: "gelu_pytorch_tanh",
		actKey: "hidden_activation", kvDefault: 4, headDim: 256, window: 4096, gemma: true,
		fields: []string{"attention_bias", "hidden_act", "query_pre_attn_scalar", "sliding_window", "layer_types",
			"sliding_window_pattern", "_sliding_window_pattern", "rope_local_base_freq", "attn_logit_softcapping",
			"final_logit_softcapping", "use_bidirectional_attention"}},
}

// hfBookkeeping lists config.json fields that do not change what the model computes (token ids,
// provenance, serving hints, the dtype the weights were saved in): accepted and not used. Any
// other field a family does not read is refused by name.
var hfBookkeeping = []string{"architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
	"bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
	"initializer_range", "use_cache", "_name_or_path", "name_or_path", "auto_map", "cache_implementation",
	"pretraining_tp", "output_attentions", "output_hidden_states", "return_dict", "use_return_dict",
	"torchscript", "id2label", "label2id", "problem_type", "tokenizer_class", "task_specific_params",
	"finetuning_task", "_attn_implementation_autoset", "is_decoder", "chunk_size_feed_forward",
	"tie_encoder_decoder", "is_encoder_decoder", "add_cross_attention", "prefix", "max_length",
	"use_bfloat16", "_commit_hash"}

// Attention implementations that compute the same attention as eager (they differ in kernels and
// rounding only); anything else is refused.
var hfAttnImplementations = []string{"eager", "sdpa", "flash_attention_2"}

// hfReader reads config.json fields, remembering which it used so that the rest can be checked.
type hfReader struct {
	raw  map[string]json.RawMessage
	used map[string]bool
}

// get unmarshals field into v; a missing or null field leaves v alone and reports false.
func (r *hfReader) get(field string, v any) (bool, error) {
	r.used[field] = true
	b, ok := r.raw[field]
	if !ok || string(b) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("field %s=%s: %w", field, b, err)
	}
	return true, nil
}

func (r *hfReader) has(field string) bool {
	b, ok := r.raw[field]
	return ok && string(b) != "null"
}

// integer reads a whole number (JSON writes some of them as 8192.0).
func (r *hfReader) integer(field string, v *int) (bool, error) {
	var f float64
	ok, err := r.get(field, &f)
	if !ok || err != nil {
		return ok, err
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return false, fmt.Errorf("field %s=%v: want an integer", field, f)
	}
	*v = int(f)
	return true, nil
}

// FromHFConfig reads a Hugging Face config.json of a llama, gemma, gemma2, gemma3_text, qwen2,
// qwen3, mistral or phi3 model, in either form transformers writes (≥ 4.56 / 5: dtype and
// rope_parameters; before: torch_dtype, rope_theta and rope_scaling). A field left out takes the
// default of the family's transformers configuration class. A field Temper does not implement
// (a rope type other than default, linear and llama3, MoE or vision fields, non-zero dropouts,
// bidirectional attention, …) is an error naming it, never silently ignored; fields that do not
// change the computation (token ids, provenance, dtype) are accepted from an explicit list.
func FromHFConfig(data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("model: hf config: %w", err)
	}
	r := &hfReader{raw: raw, used: map[string]bool{}}
	c, err := r.config()
	if err != nil {
		return Config{}, fmt.Errorf("model: hf config: %w", err)
	}
	return c, nil
}

func (r *hfReader) config() (Config, error) {
	var mt string
	if _, err := r.get("model_type", &mt); err != nil {
		return Config{}, err
	}
	fam, ok := hfFamilies[mt]
	if !ok {
		hint := ""
		if mt == "gemma3" {
			hint = " (a multimodal Gemma 3 config: use its text_config, model_type gemma3_text)"
		}
		return Config{}, fmt.Errorf("model_type=%q: allowed %q%s", mt, modelcfg.Families(), hint)
	}
	c := Config{Family: mt, RopeTheta: fam.theta, NormEps: fam.eps}
	for _, f := range []struct {
		name string
		v    *int
	}{{"vocab_size", &c.Vocab}, {"hidden_size", &c.DModel}, {"intermediate_size", &c.FFN},
		{"num_hidden_layers", &c.Layers}, {"num_attention_heads", &c.Heads}, {"max_position_embeddings", &c.MaxSeq}} {
		if _, err := r.integer(f.name, f.v); err != nil {
			return Config{}, err
		}
	}
	c.KVHeads = c.Heads
	if fam.kvDefault > 0 {
		c.KVHeads = fam.kvDefault
	}
	if _, err := r.integer("num_key_value_heads", &c.KVHeads); err != nil {
		return Config{}, err
	}
	if c.Heads > 0 {
		c.HeadDim = c.DModel / c.Heads
	}
	if fam.headDim > 0 {
		c.HeadDim = fam.headDim
	}
	if _, err := r.integer("head_dim", &c.HeadDim); err != nil {
		return Config{}, err
	}
	if _, err := r.get("rms_norm_eps", &c.NormEps); err != nil {
		return Config{}, err
	}
	c.TiedEmbeddings = fam.tied
	if _, err := r.get("tie_word_embeddings", &c.TiedEmbeddings); err != nil {
		return Config{}, err
	}
	if err := r.activation(&c, fam); err != nil {
		return Config{}, err
	}
	c.ScaleEmbeddings, c.NormPlusOne = fam.gemma, fam.gemma
	if err := r.zeroFields("attention_dropout", "resid_pdrop", "embd_pdrop"); err != nil {
		return Config{}, err
	}
	if err := r.attnImplementation(); err != nil {
		return Config{}, err
	}
	if err := r.biases(&c); err != nil {
		return Config{}, err
	}
	if err := r.familyFeatures(&c, fam); err != nil {
		return Config{}, err
	}
	if err := r.rope(&c); err != nil {
		return Config{}, err
	}
	if err := r.leftovers(mt, fam); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (r *hfReader) activation(c *Config, fam hfFamily) error {
	act := fam.act
	if c.Family == modelcfg.FamilyGemma {
		// transformers' Gemma (1) reads hidden_activation and uses the tanh GELU when it is unset,
		// whatever hidden_act says.
		r.used["hidden_act"] = true
	}
	if _, err := r.get(fam.actKey, &act); err != nil {
		return err
	}
	switch act {
	case "silu", "swish":
		c.Activation = modelcfg.ActSiLU
	case "gelu_pytorch_tanh", "gelu_new", "gelu_fast":
		c.Activation = modelcfg.ActGELU
	case "gelu":
		c.Activation = modelcfg.ActGELUExact
	default:
		return fmt.Errorf("field %s=%q: allowed silu, swish, gelu, gelu_pytorch_tanh, gelu_new, gelu_fast", fam.actKey, act)
	}
	return nil
}

// zeroFields checks that the dropouts are 0: Temper trains without dropout (LoRA's aside).
func (r *hfReader) zeroFields(fields ...string) error {
	for _, f := range fields {
		var v float64
		if _, err := r.get(f, &v); err != nil {
			return err
		}
		if v != 0 {
			return fmt.Errorf("field %s=%g: dropout is not implemented (allowed 0)", f, v)
		}
	}
	return nil
}

func (r *hfReader) attnImplementation() error {
	for _, f := range []string{"attn_implementation", "_attn_implementation"} {
		var v string
		if _, err := r.get(f, &v); err != nil {
			return err
		}
		if v != "" && !slices.Contains(hfAttnImplementations, v) {
			return fmt.Errorf("field %s=%q: allowed %q (the same attention up to rounding)", f, v, hfAttnImplementations)
		}
	}
	return nil
}

// biases maps attention_bias (q, k, v and o biases in Llama, Gemma 1/2/3 and Qwen3) and Qwen2's
// fixed q/k/v biases.
func (r *hfReader) biases(c *Config) error {
	if c.Family == modelcfg.FamilyQwen2 {
		c.QKVBias = true
		return nil
	}
	var attn, mlpBias bool
	if slices.Contains(hfFamilies[c.Family].fields, "attention_bias") {
		if _, err := r.get("attention_bias", &attn); err != nil {
			return err
		}
	}
	c.QKVBias, c.AttnOutBias = attn, attn
	if c.Family == modelcfg.FamilyLlama {
		if _, err := r.get("mlp_bias", &mlpBias); err != nil {
			return err
		}
		if mlpBias {
			return fmt.Errorf("field mlp_bias=true: MLP biases are not implemented (allowed false)")
		}
	}
	return nil
}

// familyFeatures reads the sliding windows and layer kinds, Gemma 2/3's scale and caps, and
// Phi-3's partial rotary factor.
func (r *hfReader) familyFeatures(c *Config, fam hfFamily) error {
	types := func(sliding func(l int) bool) []string {
		t := make([]string, c.Layers)
		for l := range t {
			t[l] = modelcfg.LayerFull
			if sliding(l) {
				t[l] = modelcfg.LayerSliding
			}
		}
		return t
	}
	c.PostNorms = c.Family == modelcfg.FamilyGemma2 || c.Family == modelcfg.FamilyGemma3
	c.QKNorm = c.Family == modelcfg.FamilyQwen3 || c.Family == modelcfg.FamilyGemma3
	window := fam.window
	var explicit []string
	if _, err := r.get("layer_types", &explicit); err != nil {
		return err
	}
	switch c.Family {
	case modelcfg.FamilyQwen2, modelcfg.FamilyQwen3:
		var use bool
		if _, err := r.get("use_sliding_window", &use); err != nil {
			return err
		}
		if use {
			return fmt.Errorf("field use_sliding_window=true: Qwen's sliding layers (from max_window_layers on) are not implemented (allowed false)")
		}
		r.used["sliding_window"], r.used["max_window_layers"] = true, true // unused unless use_sliding_window
		return checkLayerTypes(explicit, types(func(int) bool { return false }))
	case modelcfg.FamilyMistral, modelcfg.FamilyPhi3:
		if err := r.window(&window); err != nil {
			return err
		}
		if window > 0 {
			c.SlidingWindow = window
			c.LayerTypes = types(func(int) bool { return true })
		}
		if err := checkLayerTypes(explicit, types(func(int) bool { return window > 0 })); err != nil {
			return err
		}
		if c.Family == modelcfg.FamilyPhi3 {
			r.used["original_max_position_embeddings"] = true // read only by longrope, which is refused
			f := 1.0
			if _, err := r.get("partial_rotary_factor", &f); err != nil {
				return err
			}
			if err := setPartialRotary(c, "partial_rotary_factor", f); err != nil {
				return err
			}
		}
		return nil
	case modelcfg.FamilyGemma2, modelcfg.FamilyGemma3:
		var bidi bool
		if _, err := r.get("use_bidirectional_attention", &bidi); err != nil {
			return err
		}
		if bidi {
			return fmt.Errorf("field use_bidirectional_attention=true: only causal attention is implemented")
		}
		if err := r.window(&window); err != nil {
			return err
		}
		scalar := 256.0
		if _, err := r.get("query_pre_attn_scalar", &scalar); err != nil {
			return err
		}
		if !(scalar > 0) {
			return fmt.Errorf("field query_pre_attn_scalar=%g: must be > 0", scalar)
		}
		if scalar != float64(c.HeadDim) {
			c.QueryScale = scalar
		}
		attnCap, finalCap := 0.0, 0.0
		if c.Family == modelcfg.FamilyGemma2 {
			attnCap, finalCap = 50, 30
		}
		// An explicit null turns a cap off; a missing field takes the default.
		for _, f := range []struct {
			name string
			v    *float64
		}{{"attn_logit_softcapping", &attnCap}, {"final_logit_softcapping", &finalCap}} {
			if _, ok := r.raw[f.name]; ok && string(r.raw[f.name]) == "null" {
				*f.v = 0
			}
			if _, err := r.get(f.name, f.v); err != nil {
				return err
			}
		}
		if c.Family == modelcfg.FamilyGemma3 && attnCap != 0 {
			return fmt.Errorf("field attn_logit_softcapping=%g: transformers' Gemma 3 does not apply it (allowed null)", attnCap)
		}
		c.AttnSoftcap, c.FinalSoftcap = attnCap, finalCap
		derived := types(func(l int) bool { return l%2 == 0 }) // Gemma 2: (l+1) % 2 != 0
		if c.Family == modelcfg.FamilyGemma3 {
			pattern := 6
			for _, f := range []string{"sliding_window_pattern", "_sliding_window_pattern"} {
				if _, err := r.integer(f, &pattern); err != nil {
					return err
				}
			}
			if pattern < 1 {
				return fmt.Errorf("field sliding_window_pattern=%d: must be >= 1", pattern)
			}
			derived = types(func(l int) bool { return (l+1)%pattern != 0 })
		}
		lt := derived
		if explicit != nil {
			if len(explicit) != c.Layers {
				return fmt.Errorf("field layer_types has %d entries: want num_hidden_layers=%d", len(explicit), c.Layers)
			}
			lt = explicit
		}
		if slices.Contains(lt, modelcfg.LayerSliding) {
			if window <= 0 {
				return fmt.Errorf("field sliding_window=%d: must be > 0 with sliding layers", window)
			}
			c.SlidingWindow, c.LayerTypes = window, slices.Clone(lt)
		}
		for i, t := range lt {
			if t != modelcfg.LayerFull && t != modelcfg.LayerSliding {
				return fmt.Errorf("field layer_types[%d]=%q: allowed %q", i, t, []string{modelcfg.LayerFull, modelcfg.LayerSliding})
			}
		}
		return nil
	}
	return checkLayerTypes(explicit, types(func(int) bool { return false }))
}

// window reads sliding_window: absent keeps the family default, null means no window.
func (r *hfReader) window(w *int) error {
	if b, ok := r.raw["sliding_window"]; ok && string(b) == "null" {
		r.used["sliding_window"] = true
		*w = 0
		return nil
	}
	_, err := r.integer("sliding_window", w)
	return err
}

// checkLayerTypes accepts an explicit layer_types only when it says what the family's other
// fields imply.
func checkLayerTypes(explicit, derived []string) error {
	if explicit != nil && !slices.Equal(explicit, derived) {
		return fmt.Errorf("field layer_types=%q: this family's other fields imply %q; other layouts are not implemented", explicit, derived)
	}
	return nil
}

func setPartialRotary(c *Config, field string, f float64) error {
	if !(f > 0 && f <= 1) {
		return fmt.Errorf("field %s=%g: want 0 < factor <= 1", field, f)
	}
	dim := int(float64(c.HeadDim) * f) // transformers: int(head_dim * partial_rotary_factor)
	if dim%2 != 0 || dim == 0 {
		return fmt.Errorf("field %s=%g: head_dim %d · factor = %d rotary features, want an even number > 0", field, f, c.HeadDim, dim)
	}
	if dim != c.HeadDim {
		c.RotaryDim = dim
	}
	return nil
}

// ropeSpec is one RoPE parameter set.
type ropeSpec struct {
	theta    float64
	hasTheta bool
	scaling  *modelcfg.RopeScaling
	partial  float64 // partial_rotary_factor inside rope_parameters (transformers 5); 0: absent
}

// ropeKeys are the keys of a rope_scaling / rope_parameters object Temper reads.
var ropeKeys = []string{"rope_type", "type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor",
	"original_max_position_embeddings", "partial_rotary_factor"}

// parseRope reads a rope_scaling or rope_parameters object (field names it in errors).
func parseRope(field string, raw json.RawMessage) (ropeSpec, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return ropeSpec{}, fmt.Errorf("field %s=%s: want an object: %w", field, raw, err)
	}
	r := &hfReader{raw: m, used: map[string]bool{}}
	var sp ropeSpec
	typ := ""
	if _, err := r.get("type", &typ); err != nil {
		return sp, fmt.Errorf("%s: %w", field, err)
	}
	if _, err := r.get("rope_type", &typ); err != nil {
		return sp, fmt.Errorf("%s: %w", field, err)
	}
	ok, err := r.get("rope_theta", &sp.theta)
	if err != nil {
		return sp, fmt.Errorf("%s: %w", field, err)
	}
	sp.hasTheta = ok
	if _, err := r.get("partial_rotary_factor", &sp.partial); err != nil {
		return sp, fmt.Errorf("%s: %w", field, err)
	}
	s := modelcfg.RopeScaling{Type: typ}
	if _, err := r.get("factor", &s.Factor); err != nil {
		return sp, fmt.Errorf("%s: %w", field, err)
	}
	if _, err := r.get("low_freq_factor", &s.LowFreqFactor); err != nil {
		return sp, fmt.Errorf("%s: %w", field, err)
	}
	if _, err := r.get("high_freq_factor", &s.HighFreqFactor); err != nil {
		return sp, fmt.Errorf("%s: %w", field, err)
	}
	if _, err := r.integer("original_max_position_embeddings", &s.OriginalMaxPositions); err != nil {
		return sp, fmt.Errorf("%s: %w", field, err)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !r.used[k] && string(m[k]) != "null" {
			return sp, fmt.Errorf("field %s.%s: not implemented (read: %q)", field, k, ropeKeys)
		}
	}
	switch typ {
	case "", "default":
		if s != (modelcfg.RopeScaling{Type: typ}) {
			return sp, fmt.Errorf("field %s: rope_type %q takes no factor, low/high_freq_factor or original_max_position_embeddings", field, typ)
		}
	case modelcfg.RopeLinear:
		if s.LowFreqFactor != 0 || s.HighFreqFactor != 0 {
			return sp, fmt.Errorf("field %s: rope_type linear takes only factor", field)
		}
		s.OriginalMaxPositions = 0 // not read by linear scaling
		sp.scaling = &s
	case modelcfg.RopeLlama3:
		sp.scaling = &s
	default:
		return sp, fmt.Errorf("field %s.rope_type=%q: allowed default, linear, llama3", field, typ)
	}
	return sp, nil
}

// rope reads the RoPE fields in both forms: rope_theta + rope_scaling, or rope_parameters (one
// object, or one per layer kind for Gemma 3). Both forms at once must agree.
func (r *hfReader) rope(c *Config) error {
	var old ropeSpec
	ok, err := r.get("rope_theta", &old.theta)
	if err != nil {
		return err
	}
	old.hasTheta = ok
	hasOld := ok
	if r.has("rope_scaling") {
		r.used["rope_scaling"] = true
		sp, err := parseRope("rope_scaling", r.raw["rope_scaling"])
		if err != nil {
			return err
		}
		if sp.hasTheta || sp.partial != 0 {
			return fmt.Errorf("field rope_scaling: rope_theta and partial_rotary_factor belong outside it")
		}
		old.scaling, hasOld = sp.scaling, true
	}
	r.used["rope_scaling"] = true
	localTheta, hasLocal := 10000.0, false
	if c.Family == modelcfg.FamilyGemma3 {
		if hasLocal, err = r.get("rope_local_base_freq", &localTheta); err != nil {
			return err
		}
	}
	global := ropeSpec{theta: c.RopeTheta}
	if hasOld {
		if old.hasTheta {
			global.theta = old.theta
		}
		global.scaling = old.scaling
	}
	r.used["rope_parameters"] = true
	if r.has("rope_parameters") {
		var perKind map[string]json.RawMessage
		_ = json.Unmarshal(r.raw["rope_parameters"], &perKind)
		_, hasFullKey := perKind[modelcfg.LayerFull]
		_, hasSlidingKey := perKind[modelcfg.LayerSliding]
		var newGlobal ropeSpec
		if hasFullKey || hasSlidingKey {
			if c.Family != modelcfg.FamilyGemma3 {
				return fmt.Errorf("field rope_parameters: per-layer-kind RoPE is implemented for gemma3_text only")
			}
			for k := range perKind {
				if k != modelcfg.LayerFull && k != modelcfg.LayerSliding {
					return fmt.Errorf("field rope_parameters.%s: allowed keys %q", k, []string{modelcfg.LayerFull, modelcfg.LayerSliding})
				}
			}
			if raw, ok := perKind[modelcfg.LayerFull]; ok && string(raw) != "null" {
				if newGlobal, err = parseRope("rope_parameters."+modelcfg.LayerFull, raw); err != nil {
					return err
				}
			}
			if raw, ok := perKind[modelcfg.LayerSliding]; ok && string(raw) != "null" {
				local, err := parseRope("rope_parameters."+modelcfg.LayerSliding, raw)
				if err != nil {
					return err
				}
				if local.scaling != nil || local.partial != 0 {
					return fmt.Errorf("field rope_parameters.%s: only default RoPE is implemented for sliding layers", modelcfg.LayerSliding)
				}
				if local.hasTheta {
					if hasLocal && local.theta != localTheta {
						return fmt.Errorf("field rope_parameters.%s.rope_theta=%g disagrees with rope_local_base_freq=%g", modelcfg.LayerSliding, local.theta, localTheta)
					}
					localTheta = local.theta
				}
			}
		} else {
			if newGlobal, err = parseRope("rope_parameters", r.raw["rope_parameters"]); err != nil {
				return err
			}
		}
		if newGlobal.partial != 0 {
			if c.Family != modelcfg.FamilyPhi3 {
				return fmt.Errorf("field rope_parameters.partial_rotary_factor: implemented for phi3 only")
			}
			if err := setPartialRotary(c, "rope_parameters.partial_rotary_factor", newGlobal.partial); err != nil {
				return err
			}
		}
		if !newGlobal.hasTheta {
			newGlobal.theta = global.theta
		}
		if hasOld && (newGlobal.theta != global.theta || !reflect.DeepEqual(newGlobal.scaling, global.scaling)) {
			return fmt.Errorf("fields rope_parameters and rope_theta/rope_scaling disagree: give one form")
		}
		global = newGlobal
	}
	c.RopeTheta, c.RopeScaling = global.theta, global.scaling
	if c.Family == modelcfg.FamilyGemma3 && c.hasSliding() {
		c.RopeLocalTheta = localTheta
	}
	return nil
}

// leftovers refuses every field that is neither read by the family nor bookkeeping.
func (r *hfReader) leftovers(mt string, fam hfFamily) error {
	read := append(slices.Clone(hfCommonFields), fam.fields...)
	read = append(read, fam.actKey)
	for _, k := range slices.Sorted(maps.Keys(r.raw)) {
		if r.used[k] || slices.Contains(hfBookkeeping, k) {
			continue
		}
		if slices.Contains(read, k) {
			continue // read by the family, but only under conditions not met here
		}
		if string(r.raw[k]) == "null" {
			continue
		}
		slices.Sort(read)
		return fmt.Errorf("field %s: not implemented for model_type %q (refused rather than ignored; fields read: %s)",
			k, mt, strings.Join(slices.Compact(read), ", "))
	}
	return nil
}

// hfConfigOut is the config.json Temper writes: the pre-4.56 form (torch_dtype, rope_theta,
// rope_scaling), which every transformers version reads. Field order is fixed so that the bytes
// of the older families' files do not change.
type hfConfigOut struct {
	Architectures     []string        `json:"architectures,omitempty"`
	ModelType         string          `json:"model_type"`
	VocabSize         int             `json:"vocab_size"`
	HiddenSize        int             `json:"hidden_size"`
	IntermediateSize  int             `json:"intermediate_size"`
	NumLayers         int             `json:"num_hidden_layers"`
	NumHeads          int             `json:"num_attention_heads"`
	NumKVHeads        *int            `json:"num_key_value_heads,omitempty"`
	HeadDim           *int            `json:"head_dim,omitempty"`
	MaxPositions      int             `json:"max_position_embeddings"`
	RopeTheta         *float64        `json:"rope_theta,omitempty"`
	RopeScaling       json.RawMessage `json:"rope_scaling,omitempty"`
	RMSNormEps        *float64        `json:"rms_norm_eps,omitempty"`
	HiddenAct         string          `json:"hidden_act,omitempty"`
	HiddenActivation  string          `json:"hidden_activation,omitempty"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings,omitempty"`
	AttentionBias     *bool           `json:"attention_bias,omitempty"`
	MLPBias           *bool           `json:"mlp_bias,omitempty"`
	UseSlidingWindow  *bool           `json:"use_sliding_window,omitempty"`
	TorchDType        string          `json:"torch_dtype,omitempty"`

	QueryPreAttnScalar *float64        `json:"query_pre_attn_scalar,omitempty"`
	SlidingWindow      json.RawMessage `json:"sliding_window,omitempty"`
	LayerTypes         []string        `json:"layer_types,omitempty"`
	AttnSoftcap        json.RawMessage `json:"attn_logit_softcapping,omitempty"`
	FinalSoftcap       json.RawMessage `json:"final_logit_softcapping,omitempty"`
	RopeLocalBaseFreq  *float64        `json:"rope_local_base_freq,omitempty"`
	PartialRotary      *float64        `json:"partial_rotary_factor,omitempty"`
}

// jsonNumberOrNull is v as JSON, or null when v is 0.
func jsonNumberOrNull[N int | float64](v N) json.RawMessage {
	if v == 0 {
		return json.RawMessage("null")
	}
	b, _ := json.Marshal(v)
	return b
}

// ToHFConfig writes a config.json that transformers loads as the same architecture. A config
// that the family cannot express (e.g. q/k norms on llama) is an error: the written file is read
// back and must give c again.
func (c Config) ToHFConfig() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	fam := hfFamilies[c.Family]
	act := map[string]string{modelcfg.ActSiLU: "silu", modelcfg.ActGELU: "gelu_pytorch_tanh", modelcfg.ActGELUExact: "gelu"}[c.Activation]
	kv, hd, theta, eps, tied := c.KVHeads, c.HeadDim, c.RopeTheta, c.NormEps, c.TiedEmbeddings
	h := hfConfigOut{Architectures: []string{fam.arch}, ModelType: c.Family, VocabSize: c.Vocab,
		HiddenSize: c.DModel, IntermediateSize: c.FFN, NumLayers: c.Layers, NumHeads: c.Heads, NumKVHeads: &kv,
		HeadDim: &hd, MaxPositions: c.MaxSeq, RopeTheta: &theta, RMSNormEps: &eps, TieWordEmbeddings: &tied,
		TorchDType: "float32"}
	h.HiddenAct = act
	if fam.actKey == "hidden_activation" {
		h.HiddenActivation = act
	}
	f, bias := false, c.QKVBias
	switch c.Family {
	case modelcfg.FamilyLlama:
		h.AttentionBias, h.MLPBias = &bias, &f
	case modelcfg.FamilyQwen2:
		h.UseSlidingWindow = &f
	case modelcfg.FamilyQwen3:
		h.AttentionBias, h.UseSlidingWindow = &bias, &f
	case modelcfg.FamilyMistral, modelcfg.FamilyPhi3:
		h.SlidingWindow = jsonNumberOrNull(c.SlidingWindow)
		if c.RotaryDim > 0 {
			p := float64(c.RotaryDim) / float64(c.HeadDim)
			h.PartialRotary = &p
		}
	case modelcfg.FamilyGemma2, modelcfg.FamilyGemma3:
		h.AttentionBias = &bias
		qs := c.QueryScale
		if qs == 0 {
			qs = float64(c.HeadDim)
		}
		h.QueryPreAttnScalar = &qs
		w := c.SlidingWindow
		if w == 0 {
			w = fam.window
		}
		h.SlidingWindow = jsonNumberOrNull(w)
		h.LayerTypes = c.LayerTypes
		if len(h.LayerTypes) == 0 {
			h.LayerTypes = make([]string, c.Layers)
			for i := range h.LayerTypes {
				h.LayerTypes[i] = modelcfg.LayerFull
			}
		}
		h.AttnSoftcap, h.FinalSoftcap = jsonNumberOrNull(c.AttnSoftcap), jsonNumberOrNull(c.FinalSoftcap)
		if c.RopeLocalTheta > 0 {
			lt := c.RopeLocalTheta
			h.RopeLocalBaseFreq = &lt
		}
	case modelcfg.FamilyGemma:
		if bias {
			h.AttentionBias = &bias
		}
	}
	if c.RopeScaling != nil {
		b, err := json.Marshal(c.RopeScaling)
		if err != nil {
			return nil, err
		}
		h.RopeScaling = b
	}
	js, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, err
	}
	back, err := FromHFConfig(js)
	want := c.Clone()
	want.ValueHead, want.RewardLogProb = false, false // heads live in the weights file, not config.json
	want.Attention, want.Remat = "", ""               // how to compute, not what
	if err != nil || !reflect.DeepEqual(back, want) {
		return nil, fmt.Errorf("model: to hf config: family %q cannot express this config (%+v); read back: %+v (%v)", c.Family, c, back, err)
	}
	return js, nil
}

// HFBookkeeping reports whether a config.json field is one FromHFConfig accepts without using it
// (token ids, provenance, the dtype the weights were saved in, …): what a writer re-exporting a
// loaded model keeps from the original config.json.
func HFBookkeeping(field string) bool { return slices.Contains(hfBookkeeping, field) }
