package hf

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
)

func TestConfigFields(t *testing.T) {
	qwen3, err := os.ReadFile(filepath.Join("testdata", "qwen3-bf16-sharded", ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	add := func(extra string) []byte {
		s := strings.TrimSpace(string(qwen3))
		return []byte(s[:len(s)-1] + "," + extra + "}")
	}
	for _, tc := range []struct {
		name   string
		config []byte
		want   map[string]string // field → use
		why    map[string]string // field → a substring of Why
	}{
		{"real fields", qwen3,
			map[string]string{"hidden_size": FieldUsed, "model_type": FieldUsed, "dtype": FieldIgnored,
				"eos_token_id": FieldIgnored, "transformers_version": FieldIgnored, "use_sliding_window": FieldDefault,
				"max_window_layers": FieldDefault, "rope_parameters": FieldUsed, "attention_dropout": FieldDefault},
			map[string]string{"dtype": "dtype the weights were saved in", "eos_token_id": "generation_config.json"}},
		{"every refused field named", add(`"num_experts": 8, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}, "attention_dropout": 0.1`),
			map[string]string{"num_experts": FieldRefused, "rope_scaling": FieldRefused, "attention_dropout": FieldRefused,
				"hidden_size": FieldUsed, "dtype": FieldIgnored},
			map[string]string{"num_experts": "not implemented for model_type", "rope_scaling": "yarn", "attention_dropout": "dropout"}},
		{"unknown family", []byte(`{"model_type": "mixtral", "hidden_size": 8}`),
			map[string]string{"model_type": FieldRefused}, map[string]string{"model_type": "allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields, err := ConfigFields(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Field{}
			for _, f := range fields {
				got[f.Name] = f
			}
			for name, use := range tc.want {
				if got[name].Use != use {
					t.Errorf("field %s: use %q (%s), want %q", name, got[name].Use, got[name].Why, use)
				}
			}
			for name, sub := range tc.why {
				if !strings.Contains(got[name].Why, sub) {
					t.Errorf("field %s: why %q, want it to say %q", name, got[name].Why, sub)
				}
			}
		})
	}
	if _, err := ConfigFields([]byte(`[1]`)); err == nil {
		t.Error("a config.json that is not an object: no error")
	}
}

// The known shapes are the published models': their parameter counts are the published ones.
func TestLikes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params float64 // billions, as the model cards give them
		family string
	}{
		{"gemma3-1b", 0.9999, modelcfg.FamilyGemma3},
		{"qwen3-0.6b", 0.596, modelcfg.FamilyQwen3},
		{"llama3.2-1b", 1.236, modelcfg.FamilyLlama},
		{"qwen2.5-0.5b", 0.494, modelcfg.FamilyQwen2},
		{"mistral-7b", 7.242, modelcfg.FamilyMistral},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := LookupLike(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := model.FromHFConfig([]byte(l.Config))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseGeneration([]byte(l.Generation)); err != nil {
				t.Fatal(err)
			}
			got := float64(cfg.ParamCount()) / 1e9
			if cfg.Family != tc.family || math.Abs(got-tc.params) > 0.001 {
				t.Errorf("%s: family %s, %.4f B parameters; want %s, %.4f B", tc.name, cfg.Family, got, tc.family, tc.params)
			}
		})
	}
	if _, err := LookupLike("gpt5"); err == nil || !strings.Contains(err.Error(), "qwen3-0.6b") {
		t.Errorf("unknown shape: %v, want an error listing the known ones", err)
	}
}

// RandomWeights draws exactly what model.InitWeights draws.
func TestRandomWeightsMatchInitWeights(t *testing.T) {
	for _, name := range []string{"qwen3-bf16-sharded", "gemma3-f16", "llama-f32"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", name, ConfigFile))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := model.FromHFConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			got, err := RandomWeights(cfg, 7, 0)
			if err != nil {
				t.Fatal(err)
			}
			store := gm.NewStore()
			if err := model.InitWeights(store.RootScope(), cfg, 7, 0); err != nil {
				t.Fatal(err)
			}
			want, err := model.ExportWeights(store.RootScope(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !sameWeights(got, want) {
				t.Errorf("RandomWeights differs from InitWeights")
			}
		})
	}
}
