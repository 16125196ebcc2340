package model

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/testbackend"
)

func TestHFNamesRoundTrip(t *testing.T) {
	cfgs := tinyConfigs()
	vh := cfgs["llama"]
	vh.ValueHead = true
	cfgs["llama+value"] = vh
	vh.RewardLogProb = true
	cfgs["llama+value+logprob"] = vh
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			seen := map[string]string{}
			for _, v := range cfg.Variables() {
				names, err := cfg.HFNames(v.Path)
				if err != nil || len(names) == 0 {
					t.Fatalf("%s: no HF name (%v)", v.Path, err)
				}
				for _, n := range names {
					if prev, dup := seen[n]; dup {
						t.Fatalf("HF name %q used by %s and %s", n, prev, v.Path)
					}
					seen[n] = v.Path
					back, err := cfg.VariableForHF(n)
					if err != nil || back != v.Path {
						t.Fatalf("VariableForHF(%q) = %q, %v; want %q", n, back, err, v.Path)
					}
				}
			}
			shapes, err := cfg.HFShapes()
			if err != nil {
				t.Fatal(err)
			}
			if len(shapes) != len(seen) {
				t.Fatalf("HFShapes has %d tensors, names %d", len(shapes), len(seen))
			}
			// Canonical HF shapes for a few tensors.
			want := map[string][]int{
				"model.embed_tokens.weight":              {cfg.Vocab, cfg.DModel},
				"model.layers.1.self_attn.q_proj.weight": {cfg.Heads * cfg.HeadDim, cfg.DModel},
				"model.layers.1.self_attn.k_proj.weight": {cfg.KVHeads * cfg.HeadDim, cfg.DModel},
				"model.layers.0.self_attn.o_proj.weight": {cfg.DModel, cfg.Heads * cfg.HeadDim},
				"model.layers.0.mlp.gate_proj.weight":    {cfg.FFN, cfg.DModel},
				"model.layers.0.mlp.down_proj.weight":    {cfg.DModel, cfg.FFN},
				"model.norm.weight":                      {cfg.DModel},
			}
			if cfg.QKVBias {
				want["model.layers.0.self_attn.v_proj.bias"] = []int{cfg.KVHeads * cfg.HeadDim}
			}
			if !cfg.TiedEmbeddings {
				want["lm_head.weight"] = []int{cfg.Vocab, cfg.DModel}
			}
			if cfg.ValueHead {
				want["score.weight"] = []int{1, cfg.DModel}
			}
			if cfg.RewardLogProb {
				want["score.logprob_weight"] = []int{1}
			}
			has := func(n string) bool { _, ok := shapes[n]; return ok }
			if got := cfgs["llama"].WithHeads(has); got.ValueHead != cfg.ValueHead || got.RewardLogProb != cfg.RewardLogProb {
				t.Errorf("WithHeads read value_head=%v reward_logprob=%v from the tensor names", got.ValueHead, got.RewardLogProb)
			}
			for n, s := range want {
				if !slices.Equal(shapes[n], s) {
					t.Errorf("shape of %s = %v, want %v", n, shapes[n], s)
				}
			}
			if _, ok := shapes["lm_head.weight"]; ok == cfg.TiedEmbeddings {
				t.Errorf("lm_head.weight present=%v with tied=%v", ok, cfg.TiedEmbeddings)
			}

			w := randomWeights(cfg, 3, 1)
			hf, err := cfg.ToHF(w)
			if err != nil {
				t.Fatal(err)
			}
			for n, data := range hf {
				size := 1
				for _, d := range shapes[n] {
					size *= d
				}
				if len(data) != size {
					t.Fatalf("%s: %d values for shape %v", n, len(data), shapes[n])
				}
			}
			// [out, in] layout: k_proj[o][i] = qkv[i][heads·hd + o].
			qkv, kp := w[layerPath(VarQKV, 1)], hf["model.layers.1.self_attn.k_proj.weight"]
			width, nh := cfg.qkvWidth(), cfg.Heads*cfg.HeadDim
			for o := range cfg.KVHeads * cfg.HeadDim {
				for i := range cfg.DModel {
					if kp[o*cfg.DModel+i] != qkv[i*width+nh+o] {
						t.Fatalf("k_proj[%d][%d] is not qkv[%d][%d]", o, i, i, nh+o)
					}
				}
			}
			back, err := cfg.FromHF(hf)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, w) {
				t.Fatal("FromHF(ToHF(w)) != w")
			}
			if cfg.TiedEmbeddings {
				hf["lm_head.weight"] = hf["model.embed_tokens.weight"]
				if _, err := cfg.FromHF(hf); err != nil {
					t.Fatalf("tied lm_head.weight should be ignored: %v", err)
				}
			}
			hf["model.layers.99.mlp.up_proj.weight"] = nil
			if _, err := cfg.FromHF(hf); err == nil {
				t.Fatal("unexpected tensor accepted")
			}
		})
	}
}

// Real config.json files of the three checkpoints (as published on the Hub).
var hfConfigs = map[string]string{
	"qwen2.5-0.5b": `{"architectures":["Qwen2ForCausalLM"],"attention_dropout":0.0,"bos_token_id":151643,
	  "eos_token_id":151643,"hidden_act":"silu","hidden_size":896,"initializer_range":0.02,
	  "intermediate_size":4864,"max_position_embeddings":32768,"max_window_layers":24,"model_type":"qwen2",
	  "num_attention_heads":14,"num_hidden_layers":24,"num_key_value_heads":2,"rms_norm_eps":1e-06,
	  "rope_theta":1000000.0,"sliding_window":32768,"tie_word_embeddings":true,"torch_dtype":"bfloat16",
	  "transformers_version":"4.40.1","use_cache":true,"use_sliding_window":false,"vocab_size":151936}`,
	"llama-3.2-1b": `{"architectures":["LlamaForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
	  "bos_token_id":128000,"eos_token_id":128001,"head_dim":64,"hidden_act":"silu","hidden_size":2048,
	  "initializer_range":0.02,"intermediate_size":8192,"max_position_embeddings":131072,"mlp_bias":false,
	  "model_type":"llama","num_attention_heads":32,"num_hidden_layers":16,"num_key_value_heads":8,
	  "pretraining_tp":1,"rms_norm_eps":1e-05,"rope_scaling":{"factor":32.0,"high_freq_factor":4.0,
	  "low_freq_factor":1.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},
	  "rope_theta":500000.0,"tie_word_embeddings":true,"torch_dtype":"bfloat16",
	  "transformers_version":"4.45.0.dev0","use_cache":true,"vocab_size":128256}`,
	"gemma-2b": `{"architectures":["GemmaForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
	  "bos_token_id":2,"eos_token_id":1,"head_dim":256,"hidden_act":"gelu","hidden_size":2048,
	  "initializer_range":0.02,"intermediate_size":16384,"max_position_embeddings":8192,"model_type":"gemma",
	  "num_attention_heads":8,"num_hidden_layers":18,"num_key_value_heads":1,"pad_token_id":0,
	  "rms_norm_eps":1e-06,"rope_scaling":null,"rope_theta":10000.0,"torch_dtype":"bfloat16",
	  "transformers_version":"4.38.0.dev0","use_cache":true,"vocab_size":256000}`,
}

// Published parameter counts of the checkpoints.
var hfParamCounts = map[string]int64{
	"qwen2.5-0.5b": 494_032_768,
	"llama-3.2-1b": 1_235_814_400,
	"gemma-2b":     2_506_172_416,
}

func TestHFConfig(t *testing.T) {
	for name, js := range hfConfigs {
		t.Run(name, func(t *testing.T) {
			got, err := FromHFConfig([]byte(js))
			if err != nil {
				t.Fatal(err)
			}
			want, err := Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("FromHFConfig:\n got %+v\nwant %+v", got, want)
			}
			if n := got.ParamCount(); n != hfParamCounts[name] {
				t.Errorf("ParamCount = %d, published %d", n, hfParamCounts[name])
			}
		})
	}
	for _, name := range Presets() {
		t.Run("roundtrip/"+name, func(t *testing.T) {
			c, _ := Preset(name)
			js, err := c.ToHFConfig()
			if err != nil {
				t.Fatal(err)
			}
			back, err := FromHFConfig(js)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, c) {
				t.Fatalf("round trip:\n got %+v\nwant %+v\njson %s", back, c, js)
			}
			var m map[string]any
			if err := json.Unmarshal(js, &m); err != nil || m["model_type"] != c.Family {
				t.Fatalf("bad json %s (%v)", js, err)
			}
		})
	}
	bad := map[string]string{
		"model_type":     `{"model_type":"gpt2","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"vocab_size":8,"max_position_embeddings":8}`,
		"sliding window": `{"model_type":"qwen2","use_sliding_window":true,"hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"vocab_size":8,"max_position_embeddings":8}`,
		"rope_type":      `{"model_type":"llama","rope_scaling":{"type":"yarn","factor":4},"hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"vocab_size":8,"max_position_embeddings":8}`,
		"activation":     `{"model_type":"llama","hidden_act":"relu","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"vocab_size":8,"max_position_embeddings":8}`,
	}
	for name, js := range bad {
		if _, err := FromHFConfig([]byte(js)); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
}

func TestConfigValidateAndPresets(t *testing.T) {
	for _, name := range Presets() {
		c, err := Preset(name)
		if err != nil || c.Validate() != nil {
			t.Fatalf("preset %s: %v / %v", name, err, c.Validate())
		}
	}
	sizes := map[string][2]int64{"tiny": {50_000, 150_000}, "small": {700_000, 1_500_000}, "base": {7_000_000, 13_000_000}}
	for name, r := range sizes {
		c, _ := Preset(name)
		if c.Vocab != modelcfg.DefaultVocab {
			t.Errorf("%s vocab %d", name, c.Vocab)
		}
		if n := c.ParamCount(); n < r[0] || n > r[1] {
			t.Errorf("%s: %d params, want in %v", name, n, r)
		}
	}
	if _, err := Preset("huge"); err == nil || !strings.Contains(err.Error(), "tiny") {
		t.Errorf("unknown preset error should list names: %v", err)
	}
	good, _ := Preset("tiny")
	cases := map[string]func(*Config){
		"family":         func(c *Config) { c.Family = "gpt2" },
		"kv_heads":       func(c *Config) { c.KVHeads = 3 },
		"head_dim":       func(c *Config) { c.HeadDim = 7 },
		"activation":     func(c *Config) { c.Activation = "relu" },
		"reward_logprob": func(c *Config) { c.RewardLogProb = true },
		"vocab":          func(c *Config) { c.Vocab = 0 },
		"norm_eps":       func(c *Config) { c.NormEps = 0 },
		"rope_theta":     func(c *Config) { c.RopeTheta = -1 },
	}
	for field, mutate := range cases {
		c := good
		mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v should name the field", field, err)
		}
	}
	// ParamCount agrees with the variables actually created.
	for name, cfg := range tinyConfigs() {
		cfg.ValueHead = true
		var n int64
		for _, v := range cfg.Variables() {
			n += int64(v.Size())
		}
		if n != cfg.ParamCount() {
			t.Errorf("%s: variables hold %d values, ParamCount %d", name, n, cfg.ParamCount())
		}
	}
}

func TestRopeLlama3Scaling(t *testing.T) {
	c, _ := Preset("llama-3.2-1b")
	inv := c.ropeInvFreq()
	plain := c
	plain.RopeScaling = nil
	base := plain.ropeInvFreq()
	// High frequencies (wavelength < 8192/4) are untouched; low ones (> 8192) divided by 32.
	if inv[0] != base[0] {
		t.Errorf("highest frequency changed: %g vs %g", inv[0], base[0])
	}
	last := len(inv) - 1
	if math.Abs(inv[last]-base[last]/32) > 1e-15 {
		t.Errorf("lowest frequency %g, want %g", inv[last], base[last]/32)
	}
	for i := range inv {
		if inv[i] > base[i] || inv[i] < base[i]/32*(1-1e-12) {
			t.Fatalf("freq %d = %g outside [base/32, base] = [%g, %g]", i, inv[i], base[i]/32, base[i])
		}
	}
}

func TestValueHeadAndHidden(t *testing.T) {
	cfg := tinyConfigs()["gemma"]
	cfg.ValueHead = true
	store := newStore(t, cfg, randomWeights(cfg, 5, 0.2))
	tok, pos, mask := leftPadded([][]int{{1, 2, 3}, {4, 5}}, 5)
	outs, err := gm.MustNewExec(testbackend.Sequential(), store, func(scope *gm.Scope, tk, ps, mk *Node) []*Node {
		h := Hidden(scope, cfg, tk, ps, mk)
		return []*Node{h, Values(scope, cfg, tk, ps, mk), ValueHead(scope, cfg, h), Forward(scope, cfg, tk, ps, mk), LMHead(scope, cfg, h)}
	}).Call(tok, pos, mask)
	if err != nil {
		t.Fatal(err)
	}
	wantShapes := [][]int{{2, 5, cfg.DModel}, {2, 5}, {2, 5}, {2, 5, cfg.Vocab}, {2, 5, cfg.Vocab}}
	for i, w := range wantShapes {
		if got := outs[i].Shape().Dimensions; !slices.Equal(got, w) {
			t.Errorf("output %d shape %v, want %v", i, got, w)
		}
	}
	v1, v2 := tensors.MustCopyFlatData[float32](outs[1]), tensors.MustCopyFlatData[float32](outs[2])
	if !slices.Equal(v1, v2) {
		t.Error("Values != ValueHead(Hidden)")
	}
	// value = hidden · w + b at one position, by hand.
	h := tensors.MustCopyFlatData[float32](outs[0])
	w := randomWeights(cfg, 5, 0.2)
	var want float64 = float64(w[VarValueB][0])
	for i := range cfg.DModel {
		want += float64(h[(1*5+4)*cfg.DModel+i]) * float64(w[VarValueW][i])
	}
	if math.Abs(want-float64(v1[1*5+4])) > 1e-4 {
		t.Errorf("value %v, want %v", v1[9], want)
	}
}

func TestFLOPs(t *testing.T) {
	c, _ := Preset("tiny")                                    // d=64, 2 layers, 4 heads × 16, 2 kv heads, ffn 128, vocab 264, tied
	matmul := int64(2 * (64*(4+2*2)*16 + 4*16*64 + 3*64*128)) // per-layer qkv + out + mlp, 2 layers
	matmul += modelcfg.DefaultVocab * 64                      // output head (tied: the embedding)
	if got := c.ForwardFLOPsPerToken(0); got != float64(2*matmul) {
		t.Errorf("forward FLOPs at ctx 0 = %v, want %v", got, 2*matmul)
	}
	// attention adds 2 matmuls × 2 FLOPs × layers × heads·head_dim per key.
	if d := c.ForwardFLOPsPerToken(100) - c.ForwardFLOPsPerToken(0); d != 4*2*64*100 {
		t.Errorf("attention FLOPs for 100 keys = %v", d)
	}
	// training: 3 × forward at the mean causal context = 6·N + 6·layers·heads·head_dim·seq.
	want := 6*float64(matmul) + 6*2*64*128
	if got := c.TrainFLOPsPerToken(128); got != want {
		t.Errorf("train FLOPs = %v, want %v", got, want)
	}
}

// TestHFConfigForms reads the same model in both config.json forms, and refuses what is not
// implemented by name.
func TestHFConfigForms(t *testing.T) {
	llamaOld := `{"model_type":"llama","vocab_size":64,"hidden_size":32,"intermediate_size":48,"num_hidden_layers":2,
	  "num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":64,"torch_dtype":"bfloat16",
	  "rope_theta":500000.0,"rope_scaling":{"rope_type":"llama3","factor":32.0,"low_freq_factor":1.0,
	  "high_freq_factor":4.0,"original_max_position_embeddings":8192}}`
	llamaNew := `{"model_type":"llama","vocab_size":64,"hidden_size":32,"intermediate_size":48,"num_hidden_layers":2,
	  "num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":64,"dtype":"bfloat16",
	  "rope_parameters":{"rope_type":"llama3","rope_theta":500000.0,"factor":32.0,"low_freq_factor":1.0,
	  "high_freq_factor":4.0,"original_max_position_embeddings":8192}}`
	a, err := FromHFConfig([]byte(llamaOld))
	if err != nil {
		t.Fatal(err)
	}
	b, err := FromHFConfig([]byte(llamaNew))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) || a.RopeTheta != 500000 || a.RopeScaling == nil || a.RopeScaling.Factor != 32 {
		t.Fatalf("old form %+v\nnew form %+v", a, b)
	}
	gemma3Old := `{"model_type":"gemma3_text","vocab_size":64,"hidden_size":32,"intermediate_size":48,"num_hidden_layers":6,
	  "num_attention_heads":4,"num_key_value_heads":1,"head_dim":16,"max_position_embeddings":64,"rope_theta":1000000.0,
	  "rope_local_base_freq":10000.0,"rope_scaling":{"rope_type":"linear","factor":8.0},"sliding_window":512,
	  "sliding_window_pattern":6,"query_pre_attn_scalar":16,"final_logit_softcapping":null,"attn_logit_softcapping":null}`
	gemma3New := `{"model_type":"gemma3_text","vocab_size":64,"hidden_size":32,"intermediate_size":48,"num_hidden_layers":6,
	  "num_attention_heads":4,"num_key_value_heads":1,"head_dim":16,"max_position_embeddings":64,"sliding_window":512,
	  "layer_types":["sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention"],
	  "rope_parameters":{"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0},
	  "sliding_attention":{"rope_type":"default","rope_theta":10000.0}},"query_pre_attn_scalar":16}`
	a, err = FromHFConfig([]byte(gemma3Old))
	if err != nil {
		t.Fatal(err)
	}
	b, err = FromHFConfig([]byte(gemma3New))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) || a.RopeLocalTheta != 10000 || a.SlidingWindow != 512 || a.Sliding(5) || !a.Sliding(4) ||
		!a.QKNorm || !a.PostNorms || a.QueryScale != 0 || a.KVHeads != 1 {
		t.Fatalf("old form %+v\nnew form %+v", a, b)
	}

	mk := func(mt, extra string) string {
		return `{"model_type":"` + mt + `","vocab_size":64,"hidden_size":32,"intermediate_size":48,"num_hidden_layers":2,` +
			`"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":64` + extra + `}`
	}
	bad := []struct{ name, js, field string }{
		{"unknown field", mk("llama", `,"num_experts":8`), "num_experts"},
		{"moe on qwen3", mk("qwen3", `,"num_experts_per_tok":2`), "num_experts_per_tok"},
		{"yarn", mk("llama", `,"rope_scaling":{"rope_type":"yarn","factor":4}`), "rope_type"},
		{"new-form dynamic", mk("qwen3", `,"rope_parameters":{"rope_type":"dynamic","factor":2,"rope_theta":1e6}`), "rope_type"},
		{"rope key", mk("llama", `,"rope_parameters":{"rope_type":"default","rope_theta":1e4,"beta_fast":32}`), "beta_fast"},
		{"dropout", mk("mistral", `,"attention_dropout":0.1`), "attention_dropout"},
		{"phi3 dropout", mk("phi3", `,"resid_pdrop":0.1`), "resid_pdrop"},
		{"attn implementation", mk("llama", `,"attn_implementation":"paged_attention"`), "attn_implementation"},
		{"qwen sliding", mk("qwen3", `,"use_sliding_window":true`), "use_sliding_window"},
		{"gemma3 attn cap", mk("gemma3_text", `,"attn_logit_softcapping":50.0`), "attn_logit_softcapping"},
		{"bidirectional", mk("gemma2", `,"use_bidirectional_attention":true`), "use_bidirectional_attention"},
		{"mlp bias", mk("llama", `,"mlp_bias":true`), "mlp_bias"},
		{"qwen2 field elsewhere", mk("llama", `,"query_pre_attn_scalar":16`), "query_pre_attn_scalar"},
		{"forms disagree", mk("llama", `,"rope_theta":1e4,"rope_parameters":{"rope_type":"default","rope_theta":1e6}`), "disagree"},
		{"multimodal gemma3", mk("gemma3", ``), "text_config"},
		{"layer types", mk("mistral", `,"sliding_window":4,"layer_types":["full_attention","sliding_attention"]`), "layer_types"},
		{"activation", mk("qwen3", `,"hidden_act":"relu"`), "hidden_act"},
	}
	for _, tc := range bad {
		_, err := FromHFConfig([]byte(tc.js))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v should name %q", tc.name, err, tc.field)
		}
	}
	// Bookkeeping fields and nulls are accepted.
	if _, err := FromHFConfig([]byte(mk("mistral", `,"sliding_window":null,"bos_token_id":1,"eos_token_id":[2,3],"transformers_version":"5.0.0","dtype":"bfloat16","_name_or_path":"x","use_cache":true`))); err != nil {
		t.Errorf("bookkeeping refused: %v", err)
	}
	// A config a family cannot express is refused on the way out.
	c, _ := Preset("tiny")
	c.QKNorm = true
	if _, err := c.ToHFConfig(); err == nil || !strings.Contains(err.Error(), "cannot express") {
		t.Errorf("llama with qk_norm written: %v", err)
	}
}
