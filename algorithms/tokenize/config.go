package tokenize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// HFConfig is what a model directory's tokenizer_config.json says about its tokenizer.
type HFConfig struct {
	// BOS, EOS, PAD and UNK are the special tokens' texts; "" when null or absent.
	BOS, EOS, PAD, UNK string
	// AddBOS and AddEOS are add_bos_token / add_eos_token; nil when absent.
	AddBOS, AddEOS *bool
	// AddedTokens is added_tokens_decoder, by id.
	AddedTokens []ConfigAddedToken
	// ModelMaxLength is model_max_length; 0 when absent or transformers' "no limit" (>= 1e18).
	ModelMaxLength int
	// ChatTemplate is the raw chat_template value (a string or a list of named templates);
	// rendering it is the chat template's business.
	ChatTemplate json.RawMessage
	// Unapplied names the fields present that change transformers' behaviour but that
	// Temper does not apply (e.g. clean_up_tokenization_spaces true, padding_side), so a
	// caller can show them.
	Unapplied []string
}

// ConfigAddedToken is one entry of added_tokens_decoder.
type ConfigAddedToken struct {
	ID                                 int
	Content                            string
	LStrip, RStrip, SingleWord, Normal bool // Normal is "normalized"
	Special                            bool
}

// configToken is a special token in either of transformers' forms: a string, or an
// AddedToken object {"__type": "AddedToken", "content": ...}.
type configToken struct {
	set     bool
	content string
}

func (t *configToken) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		t.set = true
		return json.Unmarshal(b, &t.content)
	case len(b) > 0 && b[0] == '{':
		var o struct {
			Content *string `json:"content"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		if o.Content == nil {
			return fmt.Errorf("AddedToken object without content")
		}
		t.set, t.content = true, *o.Content
		return nil
	}
	return fmt.Errorf("want a string, an AddedToken object or null, got %s", b)
}

type configAdded struct {
	Content    *string `json:"content"`
	LStrip     bool    `json:"lstrip"`
	RStrip     bool    `json:"rstrip"`
	SingleWord bool    `json:"single_word"`
	Normalized *bool   `json:"normalized"`
	Special    bool    `json:"special"`
}

// LoadHFConfig reads tokenizer_config.json. Every field is optional; a field of the wrong
// shape is an error naming it.
func LoadHFConfig(r io.Reader) (*HFConfig, error) {
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return nil, fmt.Errorf("tokenize: load tokenizer_config.json: %w", err)
	}
	c := &HFConfig{}
	field := func(name string, dst any) error {
		v, ok := raw[name]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("tokenize: load tokenizer_config.json: field %s: %w", name, err)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"bos_token", &c.BOS}, {"eos_token", &c.EOS}, {"pad_token", &c.PAD}, {"unk_token", &c.UNK}} {
		var t configToken
		if err := field(f.name, &t); err != nil {
			return nil, err
		}
		*f.dst = t.content
	}
	if err := field("add_bos_token", &c.AddBOS); err != nil {
		return nil, err
	}
	if err := field("add_eos_token", &c.AddEOS); err != nil {
		return nil, err
	}
	var maxLen *float64
	if err := field("model_max_length", &maxLen); err != nil {
		return nil, err
	}
	if maxLen != nil {
		switch {
		case *maxLen < 0 || *maxLen != math.Trunc(*maxLen):
			return nil, fmt.Errorf("tokenize: load tokenizer_config.json: field model_max_length: %v is not a non-negative integer", *maxLen)
		case *maxLen < 1e18:
			c.ModelMaxLength = int(*maxLen)
		}
	}
	var added map[string]configAdded
	if err := field("added_tokens_decoder", &added); err != nil {
		return nil, err
	}
	for key, a := range added {
		id, err := strconv.Atoi(key)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("tokenize: load tokenizer_config.json: field added_tokens_decoder: key %q is not a token id", key)
		}
		if a.Content == nil || *a.Content == "" {
			return nil, fmt.Errorf("tokenize: load tokenizer_config.json: field added_tokens_decoder[%d]: missing content", id)
		}
		normal := !a.Special
		if a.Normalized != nil {
			normal = *a.Normalized
		}
		c.AddedTokens = append(c.AddedTokens, ConfigAddedToken{ID: id, Content: *a.Content, LStrip: a.LStrip,
			RStrip: a.RStrip, SingleWord: a.SingleWord, Normal: normal, Special: a.Special})
	}
	sort.Slice(c.AddedTokens, func(i, j int) bool { return c.AddedTokens[i].ID < c.AddedTokens[j].ID })
	c.ChatTemplate = raw["chat_template"]
	for name, v := range raw {
		if unappliedField(name, v) {
			c.Unapplied = append(c.Unapplied, name)
		}
	}
	sort.Strings(c.Unapplied)
	return c, nil
}

// unappliedField reports a field whose value would make transformers behave differently
// from Temper's tokenizer.
func unappliedField(name string, v json.RawMessage) bool {
	isTrue := bytes.Equal(bytes.TrimSpace(v), []byte("true"))
	switch name {
	case "clean_up_tokenization_spaces", "split_special_tokens", "do_lower_case", "spaces_between_special_tokens":
		return isTrue
	case "padding_side", "truncation_side", "sp_model_kwargs", "legacy", "add_prefix_space":
		return false // no effect on a tokenizer.json-backed fast tokenizer's ids
	}
	return false
}

// WithConfig returns a copy that takes its specials from tokenizer_config.json: BOS, EOS and
// PAD by name (a name the tokenizer does not know is an error), and, when the config sets
// add_bos_token or add_eos_token, a post-processor template "[BOS] $A [EOS]" with those
// flags, which is how transformers' Llama and Gemma tokenizers rebuild it (defaults: BOS
// on, EOS off). added_tokens_decoder must agree with tokenizer.json's added tokens (id and
// flags); a token only the config has is an error, as Temper does not add tokens.
func (b *BPE) WithConfig(c *HFConfig) (*BPE, error) {
	for _, a := range c.AddedTokens {
		var t *addedToken
		for i := range b.added.tokens {
			if b.added.tokens[i].id == a.ID {
				t = &b.added.tokens[i]
			}
		}
		switch {
		case t == nil:
			return nil, fmt.Errorf("tokenize: with config: added_tokens_decoder[%d] %q is not an added token of tokenizer.json", a.ID, a.Content)
		case t.text != a.Content || t.lstrip != a.LStrip || t.rstrip != a.RStrip || t.singleWord != a.SingleWord ||
			t.normalized != a.Normal || t.special != a.Special:
			return nil, fmt.Errorf("tokenize: with config: added_tokens_decoder[%d] %q (lstrip %v rstrip %v single_word %v normalized %v special %v) differs from tokenizer.json's %q (%v %v %v %v %v)",
				a.ID, a.Content, a.LStrip, a.RStrip, a.SingleWord, a.Normal, a.Special,
				t.text, t.lstrip, t.rstrip, t.singleWord, t.normalized, t.special)
		}
	}
	out, err := b.WithSpecial(c.BOS, c.EOS, c.PAD)
	if err != nil {
		return nil, fmt.Errorf("tokenize: with config: %w", err)
	}
	if c.AddBOS == nil && c.AddEOS == nil {
		return out, nil
	}
	addBOS := c.AddBOS == nil || *c.AddBOS
	addEOS := c.AddEOS != nil && *c.AddEOS
	var tmpl postTemplate
	for _, part := range []struct {
		on   bool
		name string
		id   int
	}{{addBOS, "bos_token", out.special.BOS}, {false, "", 0}, {addEOS, "eos_token", out.special.EOS}} {
		if part.name == "" {
			tmpl.pieces = append(tmpl.pieces, templateItem{sequence: true})
			continue
		}
		if !part.on {
			continue
		}
		if part.id < 0 {
			return nil, fmt.Errorf("tokenize: with config: add_%s is true but %s is null", part.name[:3]+"_token", part.name)
		}
		tmpl.pieces = append(tmpl.pieces, templateItem{ids: []int{part.id}, tokens: []string{b.tokens[part.id]}})
	}
	out.post = tmpl
	return out, nil
}
