package hf

import (
	"encoding/json"
	"fmt"
)

// Generation is what Temper reads of generation_config.json: the token ids that end, start and
// pad a generation. The file itself is carried verbatim (Meta.Files), never rewritten.
type Generation struct {
	EOS []int // eos_token_id: one id or a list (Llama 3, Gemma 3 and Qwen3 list several)
	BOS []int
	Pad []int
}

// ParseGeneration reads generation_config.json; an id field may be absent, null, a number or a
// list of numbers.
func ParseGeneration(data []byte) (*Generation, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, badf("hf: %s: %w", GenerationConfigFile, err)
	}
	g := &Generation{}
	for _, f := range []struct {
		field string
		dst   *[]int
	}{{"eos_token_id", &g.EOS}, {"bos_token_id", &g.BOS}, {"pad_token_id", &g.Pad}} {
		ids, err := tokenIDs(raw[f.field])
		if err != nil {
			return nil, badf("hf: %s: field %s=%s: want a token id or a list of them", GenerationConfigFile, f.field, raw[f.field])
		}
		*f.dst = ids
	}
	return g, nil
}

func tokenIDs(b json.RawMessage) ([]int, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(b, &one); err == nil {
		if one < 0 {
			return nil, fmt.Errorf("negative id")
		}
		return []int{one}, nil
	}
	var list []int
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	for _, id := range list {
		if id < 0 {
			return nil, fmt.Errorf("negative id")
		}
	}
	return list, nil
}
