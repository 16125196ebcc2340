package tokenize

import "sort"

// Tokenizer maps text to token ids and back.
type Tokenizer interface {
	// Encode tokenises text without adding BOS/EOS.
	Encode(text string) []int
	// Decode renders ids as text, skipping ids outside the vocabulary.
	Decode(ids []int) string
	// VocabSize is one more than the largest id Encode or Special can return.
	VocabSize() int
	// Special reports the BOS/EOS/PAD ids and the named special tokens.
	Special() Special
}

// SpecialToken is a named token with a fixed id (an added or control token).
type SpecialToken struct {
	Text string
	ID   int
}

// Special holds the conventional control ids (-1 when the tokenizer has
// none) and a lookup of named special/added tokens. It is an immutable value:
// copies share a read-only table.
type Special struct {
	BOS, EOS, PAD int
	named         []SpecialToken // sorted by Text, unique
}

// NewSpecial builds a Special. When a text appears twice, the first wins.
func NewSpecial(bos, eos, pad int, named []SpecialToken) Special {
	s := make([]SpecialToken, len(named))
	copy(s, named)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Text < s[j].Text })
	out := s[:0]
	for i, t := range s {
		if i > 0 && t.Text == s[i-1].Text {
			continue
		}
		out = append(out, t)
	}
	return Special{BOS: bos, EOS: eos, PAD: pad, named: out}
}

// ID returns the id of a named special or added token, such as "<|eot_id|>".
func (s Special) ID(token string) (int, bool) {
	i := sort.Search(len(s.named), func(i int) bool { return s.named[i].Text >= token })
	if i < len(s.named) && s.named[i].Text == token {
		return s.named[i].ID, true
	}
	return 0, false
}

// OffsetEncoder is a Tokenizer that also says where each id came from: offsets[i] is the byte
// span [start, end) of text that produced ids[i] (Hugging Face's offsets, in bytes of the input,
// not of the normalised text). Spans are non-decreasing; text inserted by normalisation (a
// prepended "▁") takes the span of the character it was inserted before, as in Hugging Face,
// ids that share one character split across tokens share its span, and special tokens added by a
// template have the empty span (0, 0). A chat template uses this to mark which ids of a
// rendered conversation belong to assistant text, after tokenising the whole text at once.
type OffsetEncoder interface {
	Tokenizer
	EncodeOffsets(text string) (ids []int, offsets [][2]int)
}
