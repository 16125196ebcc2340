package chat

import (
	"embed"
	"fmt"
	"slices"
)

// The real tokenizer_config.json files (chat templates included) of three families, the ones the
// golden renders check (scripts/goldens/chat), kept in the binary so that `temper model init` can
// give a random model of those shapes its family's real chat template without a download.
//
//go:embed testdata/qwen3/tokenizer_config.json testdata/llama3_1/tokenizer_config.json testdata/gemma3/tokenizer_config.json
var familyConfigs embed.FS

// FamilyConfigs names the families whose tokenizer_config.json FamilyConfig returns.
var FamilyConfigs = []string{"gemma3", "llama3_1", "qwen3"}

// FamilyConfig is the real tokenizer_config.json of a family of FamilyConfigs.
func FamilyConfig(name string) ([]byte, error) {
	if !slices.Contains(FamilyConfigs, name) {
		return nil, fmt.Errorf("chat: family config %q: allowed %q", name, FamilyConfigs)
	}
	b, err := familyConfigs.ReadFile("testdata/" + name + "/tokenizer_config.json")
	if err != nil {
		return nil, fmt.Errorf("chat: family config %s: %w", name, err)
	}
	return b, nil
}
