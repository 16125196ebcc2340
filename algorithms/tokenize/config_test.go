package tokenize

import (
	"reflect"
	"strings"
	"testing"
)

func loadGoldenConfig(t *testing.T, name string) *HFConfig {
	t.Helper()
	r := openGz(t, name+".tokenizer_config.json.gz")
	defer r.Close()
	c, err := LoadHFConfig(r)
	if err != nil {
		t.Fatalf("LoadHFConfig(%s): %v", name, err)
	}
	return c
}

// TestHFConfigReal loads the real tokenizer_config.json files beside the goldens and gives
// their tokenizers the specials the configs name.
func TestHFConfigReal(t *testing.T) {
	tests := []struct {
		name          string
		bos, eos, pad int
		maxLen        int
		added         int
		unapplied     []string
		special       []int // EncodeSpecial("hi") with the config applied
	}{
		{name: "qwen3", bos: -1, eos: 151645, pad: 151643, maxLen: 131072, added: 26, special: []int{6023}},
		{name: "llama3_1", bos: 128000, eos: 128009, pad: -1, maxLen: 0, added: 256,
			unapplied: []string{"clean_up_tokenization_spaces"}, special: []int{128000, 6151}},
		{name: "gemma3", bos: 2, eos: 106, pad: 0, maxLen: 32768, added: 6415, special: []int{2, 2202}},
		// add_bos_token true without a template in tokenizer.json: the rebuilt template adds BOS.
		{name: "deepseek_v3", bos: 0, eos: 1, pad: 1, maxLen: 131072, special: []int{0, 6366}},
		{name: "gpt4o", bos: 199999, eos: 199999, pad: -1, maxLen: 128000, special: []int{3686}},
		{name: "llama2", bos: 1, eos: 2, pad: -1, maxLen: 0, added: 3, special: []int{1, 12014}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := loadGoldenConfig(t, tc.name)
			if c.ModelMaxLength != tc.maxLen || len(c.AddedTokens) != tc.added || !reflect.DeepEqual(c.Unapplied, tc.unapplied) {
				t.Errorf("config: max %d added %d unapplied %v", c.ModelMaxLength, len(c.AddedTokens), c.Unapplied)
			}
			b, err := loadGoldenTokenizer(t, tc.name).WithConfig(c)
			if err != nil {
				t.Fatal(err)
			}
			sp := b.Special()
			if sp.BOS != tc.bos || sp.EOS != tc.eos || sp.PAD != tc.pad {
				t.Errorf("special = %d/%d/%d, want %d/%d/%d", sp.BOS, sp.EOS, sp.PAD, tc.bos, tc.eos, tc.pad)
			}
			if got := b.EncodeSpecial("hi"); !reflect.DeepEqual(got, tc.special) {
				t.Errorf("EncodeSpecial(hi) = %v, want %v", got, tc.special)
			}
		})
	}
}

func TestHFConfigErrors(t *testing.T) {
	tok := loadFixture(t, "llama3_tiny.json")
	tests := []struct {
		name, json, wantErr string
	}{
		{"not json", `[`, "load tokenizer_config.json"},
		{"bos number", `{"bos_token": 5}`, "field bos_token"},
		{"bos object without content", `{"bos_token": {"__type": "AddedToken"}}`, "field bos_token"},
		{"max length fraction", `{"model_max_length": 1.5}`, "field model_max_length"},
		{"added key", `{"added_tokens_decoder": {"x": {"content": "a"}}}`, `key "x"`},
		{"added content", `{"added_tokens_decoder": {"3": {}}}`, "added_tokens_decoder[3]: missing content"},
		{"unknown special", `{"eos_token": "<nope>"}`, `token "<nope>" not in vocabulary`},
		{"added only in config", `{"added_tokens_decoder": {"300": {"content": "<x>", "special": true}}}`, "not an added token of tokenizer.json"},
		{"added flags differ", `{"added_tokens_decoder": {"263": {"content": "<|eot_id|>", "lstrip": true, "special": true}}}`, "differs from tokenizer.json"},
		{"added normalized differs", `{"added_tokens_decoder": {"263": {"content": "<|eot_id|>", "normalized": true, "special": true}}}`, "differs from tokenizer.json"},
		{"add bos without bos", `{"add_bos_token": true}`, "add_bos_token is true but bos_token is null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadHFConfig(strings.NewReader(tc.json))
			if err == nil {
				_, err = tok.WithConfig(c)
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "tokenize: ") {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
	// Both token forms, and add_eos_token.
	c, err := LoadHFConfig(strings.NewReader(`{"bos_token": {"__type": "AddedToken", "content": "<|begin_of_text|>"},
		"eos_token": "<|eot_id|>", "pad_token": null, "add_eos_token": true, "chat_template": "{{ x }}", "model_max_length": 1e30}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.BOS != "<|begin_of_text|>" || c.EOS != "<|eot_id|>" || c.PAD != "" || string(c.ChatTemplate) != `"{{ x }}"` || c.ModelMaxLength != 0 {
		t.Errorf("config = %+v", c)
	}
	b, err := tok.WithConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.EncodeSpecial("hi"), []int{262, 104, 105, 263}; !reflect.DeepEqual(got, want) {
		t.Errorf("EncodeSpecial = %v, want %v", got, want)
	}
	if got, want := tok.EncodeSpecial("hi"), []int{104, 105}; !reflect.DeepEqual(got, want) {
		t.Errorf("the original changed: EncodeSpecial = %v, want %v", got, want)
	}
}
