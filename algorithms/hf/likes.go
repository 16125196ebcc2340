package hf

import (
	"fmt"
	"maps"
	"slices"
)

// Like is a real model's shape: its config.json and generation_config.json as published, for a
// random-initialised model to try Temper at that size (`temper model init --like NAME`).
type Like struct {
	// Source is where the files were published.
	Source string
	// Config and Generation are config.json and generation_config.json as published.
	Config, Generation string
	// Tokenizer names the family whose real tokenizer.json and tokenizer_config.json Temper
	// carries (tokenize.FamilyTokenizer, chat.FamilyConfig), "" when it carries none of this model.
	Tokenizer string
	// Note says how the tokenizer differs from the model's own, if it does.
	Note string
}

// Likes are the known shapes. Each config.json is the file published on the Hugging Face Hub at
// Source (…/raw/main/config.json and generation_config.json), field for field.
var Likes = map[string]Like{
	"gemma3-1b": {
		Source: "https://huggingface.co/google/gemma-3-1b-it",
		Config: `{"architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
  "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
  "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
  "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000, "rope_scaling": null,
  "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
  "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144}`,
		Generation: `{"bos_token_id": 2, "cache_implementation": "hybrid", "do_sample": true, "eos_token_id": [1, 106],
  "pad_token_id": 0, "top_k": 64, "top_p": 0.95, "transformers_version": "4.50.0.dev0"}`,
		Tokenizer: "gemma3",
	},
	"qwen3-0.6b": {
		Source: "https://huggingface.co/Qwen/Qwen3-0.6B",
		Config: `{"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
  "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
  "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936}`,
		Generation: `{"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
  "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"}`,
		Tokenizer: "qwen3",
	},
	"llama3.2-1b": {
		Source: "https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct",
		Config: `{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256}`,
		Generation: `{"bos_token_id": 128000, "do_sample": true, "eos_token_id": [128001, 128008, 128009],
  "temperature": 0.6, "top_p": 0.9, "transformers_version": "4.45.0.dev0"}`,
		Tokenizer: "llama3_1",
		Note:      "Llama 3.1's tokenizer and chat template (Llama 3.2 has the same tokenizer; its template adds a date line)",
	},
	"qwen2.5-0.5b": {
		Source: "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct",
		Config: `{"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936}`,
		Generation: `{"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
  "repetition_penalty": 1.1, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "transformers_version": "4.37.0"}`,
		Tokenizer: "qwen3",
		Note:      "Qwen3's tokenizer and chat template (Qwen2.5 has the same vocabulary; its own template differs)",
	},
	"mistral-7b": {
		Source: "https://huggingface.co/mistralai/Mistral-7B-v0.1",
		Config: `{"architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000}`,
		Generation: `{"bos_token_id": 1, "eos_token_id": 2, "transformers_version": "4.34.0.dev0"}`,
		Note:       "no Mistral tokenizer is carried: pass --tokenizer DIR; without one the model trains and generates on byte ids, and temper serve asks for --tokenizer",
	},
}

// LikeNames lists Likes' names in order.
func LikeNames() []string { return slices.Sorted(maps.Keys(Likes)) }

// LookupLike returns the known shape name.
func LookupLike(name string) (Like, error) {
	l, ok := Likes[name]
	if !ok {
		return Like{}, fmt.Errorf("hf: like %q: known shapes %q (or a model directory)", name, LikeNames())
	}
	return l, nil
}
