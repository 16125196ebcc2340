package hf

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"

	"github.com/temperml/temper/algorithms/model"
)

// What Temper does with a config.json field (ConfigFields).
const (
	FieldUsed    = "used"    // changes what Temper computes
	FieldDefault = "default" // read and checked; its value is what Temper assumes without it
	FieldIgnored = "ignored" // accepted and not used: it cannot change what the model computes
	FieldRefused = "refused" // Temper does not implement it: loading the directory fails
)

// Field is one config.json field and what Temper does with it.
type Field struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
	Use   string          `json:"use"` // FieldUsed, FieldDefault, FieldIgnored or FieldRefused
	Why   string          `json:"why"` // for ignored fields why that is harmless, for refused ones the error
}

// ignoredWhy says why each bookkeeping field (model.HFBookkeeping) cannot change the computation.
var ignoredWhy = map[string]string{
	"architectures":                "the class transformers instantiates; Temper goes by model_type",
	"transformers_version":         "provenance",
	"_name_or_path":                "provenance",
	"name_or_path":                 "provenance",
	"_commit_hash":                 "provenance",
	"torch_dtype":                  "the dtype the weights were saved in: Temper reads each tensor's own safetensors dtype, trains in float32 and writes this dtype back",
	"dtype":                        "the dtype the weights were saved in: Temper reads each tensor's own safetensors dtype, trains in float32 and writes this dtype back",
	"bos_token_id":                 "token id: the tokenizer (tokenizer.json, tokenizer_config.json) says where BOS goes",
	"eos_token_id":                 "token id: generation stops at generation_config.json's eos_token_id and the chat template's end-of-turn tokens",
	"pad_token_id":                 "token id: Temper masks padding itself",
	"sep_token_id":                 "token id of encoder models",
	"decoder_start_token_id":       "token id of encoder-decoder models",
	"initializer_range":            "the std of new weights (temper model init draws N(0, 0.02²))",
	"use_cache":                    "inference hint: Temper always decodes with its own KV cache",
	"cache_implementation":         "inference hint: Temper always decodes with its own KV cache",
	"pretraining_tp":               "a pretraining parallelism hint",
	"auto_map":                     "remote-code class names; Temper runs its own implementation",
	"tokenizer_class":              "Temper reads tokenizer.json itself",
	"max_length":                   "a generation default; temper generate and serve take their own limits",
	"use_bfloat16":                 "a legacy dtype hint (the weights' dtype is read from the file)",
	"_attn_implementation_autoset": "transformers bookkeeping",
}

// fieldInError finds the config.json field an error of model.FromHFConfig names.
var fieldInError = regexp.MustCompile(`\bfields? ([A-Za-z_][A-Za-z0-9_]*)|\b(model_type)=`)

// ConfigFields says, for every field of a config.json, what Temper does with it: used, read at
// its default value, ignored (with why that is harmless) or refused (with the error loading
// gives). Every refused field is listed, not only the first one loading stops at. It fails only
// when config.json is not a JSON object or an error names no field of it.
func ConfigFields(configJSON []byte) ([]Field, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(configJSON, &raw); err != nil {
		return nil, badf("hf: %s: %w", ConfigFile, err)
	}
	refused := map[string]string{}
	rest := maps.Clone(raw)
	var cfg model.Config
	for {
		c, err := fromFields(rest)
		if err == nil {
			cfg = c
			break
		}
		name := ""
		if m := fieldInError.FindStringSubmatch(err.Error()); m != nil {
			name = m[1] + m[2]
		}
		if _, ok := rest[name]; !ok {
			if len(refused) == 0 {
				return nil, badf("hf: %s: %w", ConfigFile, err)
			}
			// The refusals found so far are the answer; what remains cannot be classified.
			for k := range rest {
				if _, done := refused[k]; !done && !model.HFBookkeeping(k) {
					refused[k] = "not checked: " + err.Error()
				}
			}
			break
		}
		refused[name] = err.Error()
		delete(rest, name)
		if name == "model_type" {
			break
		}
	}
	var out []Field
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		f := Field{Name: k, Value: raw[k]}
		switch {
		case refused[k] != "":
			f.Use, f.Why = FieldRefused, refused[k]
		case k == "model_type":
			f.Use = FieldUsed
		case model.HFBookkeeping(k):
			f.Use, f.Why = FieldIgnored, ignoredWhy[k]
			if f.Why == "" {
				f.Why = "transformers API or task metadata"
			}
		case len(refused) > 0:
			f.Use = FieldUsed // not decidable field by field while others are refused
		default:
			f.Use = FieldUsed
			without := maps.Clone(raw)
			delete(without, k)
			if c, err := fromFields(without); err == nil && reflect.DeepEqual(c, cfg) {
				f.Use = FieldDefault
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// fromFields reads a config.json given as its fields.
func fromFields(m map[string]json.RawMessage) (model.Config, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return model.Config{}, fmt.Errorf("hf: %s: %w", ConfigFile, err)
	}
	return model.FromHFConfig(b)
}
