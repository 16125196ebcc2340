package tokenize

import (
	"reflect"
	"testing"
)

// TestEncodeOffsetsConsistent: on arbitrary bytes (invalid UTF-8 included, which the reference
// cannot be asked about), EncodeOffsets gives Encode's ids, and spans that stay inside the
// input and never go backwards.
func TestEncodeOffsetsConsistent(t *testing.T) {
	pieces := []string{"\xff", "\xc3", "\xe2\x82", "e\u0301", "Å", "ﬁ", " ", "  ", "\n", "a", "Z", "1", "'s", "中",
		"😀", "\u200d", "<|im_start|>", "<bos>", "▁", "x", "İ", "\t", "\u00a0"}
	rng := uint32(5)
	var texts []string
	for n := 0; n < 400; n++ {
		s := ""
		for k := n % 13; k >= 0; k-- {
			rng = rng*1664525 + 1013904223
			s += pieces[(rng>>16)%uint32(len(pieces))]
		}
		texts = append(texts, s)
	}
	for _, name := range []string{"qwen3", "llama2", "gemma3", "gpt4o"} {
		b := loadGoldenTokenizer(t, name)
		for _, s := range texts {
			ids, offs := b.EncodeOffsets(s)
			if enc := b.Encode(s); !sameInts(enc, ids) {
				t.Errorf("%s: Encode(%q) = %v, EncodeOffsets ids %v", name, s, enc, ids)
				continue
			}
			last := 0
			for i, o := range offs {
				if o[0] < 0 || o[1] > len(s) || o[0] > o[1] || o[0] < last {
					t.Errorf("%s: EncodeOffsets(%q) span %d = %v (previous start %d)", name, s, i, o, last)
					break
				}
				last = o[0]
			}
		}
	}
	if !reflect.DeepEqual(loadGoldenTokenizer(t, "qwen3").Encode("\xffe\u0301"), loadGoldenTokenizer(t, "qwen3").Encode("\xffé")) {
		t.Errorf("NFC next to an invalid byte: e+U+0301 and é differ")
	}
}
