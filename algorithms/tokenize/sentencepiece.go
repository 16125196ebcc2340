package tokenize

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	sentencepiece "github.com/eliben/go-sentencepiece"
	"google.golang.org/protobuf/encoding/protowire"
)

// SentencePiece is a SentencePiece BPE tokenizer (Gemma's tokenizer.model),
// encoded and decoded by github.com/eliben/go-sentencepiece. That library
// supports BPE models whose normalizer only escapes spaces as '▁'
// (add_dummy_prefix and remove_extra_whitespaces false), which is Gemma's;
// LoadSentencePiece rejects other models rather than mis-tokenising them.
type SentencePiece struct {
	proc    *sentencepiece.Processor
	pieces  int
	isByte  []bool // byte-fallback pieces <0xXX>: one normalised byte each
	special Special
}

// SentencePiece piece types (sentencepiece_model.proto).
const (
	spNormal      = 1
	spUnknown     = 2
	spControl     = 3
	spUserDefined = 4
	spByte        = 6
)

// spModel is the part of a ModelProto read here, to validate before the
// library sees it and to recover what the library does not expose.
type spModel struct {
	pieces           []spPiece
	modelType        uint64 // TrainerSpec.model_type, default 1 (UNIGRAM)
	bos, eos, pad    int64  // TrainerSpec ids, defaults 1, 2, -1
	hasNormalizer    bool
	addDummyPrefix   *bool
	removeExtraSpace *bool
	escapeSpaces     bool
}

type spPiece struct {
	text string
	typ  uint64
}

// LoadSentencePiece reads a serialized SentencePiece ModelProto.
// BOS/EOS/PAD come from the trainer spec's bos_id/eos_id/pad_id; Special.ID
// knows every control, user-defined and unknown piece.
func LoadSentencePiece(r io.Reader) (*SentencePiece, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("tokenize: load sentencepiece: %w", err)
	}
	m, err := parseSPModel(data)
	if err != nil {
		return nil, fmt.Errorf("tokenize: load sentencepiece: %w", err)
	}
	switch {
	case m.modelType != 2:
		return nil, fmt.Errorf("tokenize: load sentencepiece: model type %d unsupported, want 2 (BPE)", m.modelType)
	case !m.hasNormalizer || m.addDummyPrefix == nil || m.removeExtraSpace == nil:
		// The library dereferences these fields unchecked.
		return nil, errors.New("tokenize: load sentencepiece: normalizer_spec must set add_dummy_prefix and remove_extra_whitespaces")
	case *m.addDummyPrefix || *m.removeExtraSpace || !m.escapeSpaces:
		return nil, errors.New("tokenize: load sentencepiece: only add_dummy_prefix=false, remove_extra_whitespaces=false, escape_whitespaces=true are supported")
	}
	proc, err := newProcessor(data)
	if err != nil {
		return nil, fmt.Errorf("tokenize: load sentencepiece: %w", err)
	}
	inRange := func(id int64) int {
		if id >= 0 && id < int64(len(m.pieces)) {
			return int(id)
		}
		return -1
	}
	var named []SpecialToken
	isByte := make([]bool, len(m.pieces))
	for id, p := range m.pieces {
		isByte[id] = p.typ == spByte
		switch p.typ {
		case spControl, spUserDefined, spUnknown:
			named = append(named, SpecialToken{Text: p.text, ID: id})
		}
	}
	return &SentencePiece{
		proc:    proc,
		pieces:  len(m.pieces),
		isByte:  isByte,
		special: NewSpecial(inRange(m.bos), inRange(m.eos), inRange(m.pad), named),
	}, nil
}

// newProcessor calls the library, turning any panic on input it did not
// anticipate into an error.
func newProcessor(data []byte) (p *sentencepiece.Processor, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("sentencepiece library panicked: %v", r)
		}
	}()
	return sentencepiece.NewProcessor(bytes.NewReader(data))
}

func parseSPModel(b []byte) (*spModel, error) {
	m := &spModel{modelType: 1, bos: 1, eos: 2, pad: -1, escapeSpaces: true}
	err := walkFields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			p := spPiece{typ: spNormal}
			err := walkFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					p.text = string(v)
				case num == 3 && typ == protowire.VarintType:
					p.typ = x
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("piece %d: %w", len(m.pieces), err)
			}
			m.pieces = append(m.pieces, p)
		case num == 2 && typ == protowire.BytesType:
			return walkFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				if typ != protowire.VarintType {
					return nil
				}
				switch num {
				case 3:
					m.modelType = x
				case 41:
					m.bos = int64(int32(x))
				case 42:
					m.eos = int64(int32(x))
				case 43:
					m.pad = int64(int32(x))
				}
				return nil
			})
		case num == 3 && typ == protowire.BytesType:
			m.hasNormalizer = true
			return walkFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				if typ != protowire.VarintType {
					return nil
				}
				flag := x != 0
				switch num {
				case 3:
					m.addDummyPrefix = &flag
				case 4:
					m.removeExtraSpace = &flag
				case 5:
					m.escapeSpaces = flag
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(m.pieces) == 0 {
		return nil, errors.New("model has no pieces")
	}
	return m, nil
}

// walkFields calls fn for each field of a serialized message: v holds the
// bytes of length-delimited fields, x the value of varints.
func walkFields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("bad protobuf tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("bad protobuf field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// Encode tokenises text; user-defined pieces (Gemma's <start_of_turn>) are
// matched in the text, control pieces (<bos>) never are.
func (s *SentencePiece) Encode(text string) []int {
	if text == "" {
		return nil // the library would return [<unk>] without byte fallback
	}
	toks := s.proc.Encode(text)
	ids := make([]int, len(toks))
	for i, t := range toks {
		ids[i] = t.ID
	}
	return ids
}

// EncodeOffsets is Encode with each id's byte span of text, with Hugging Face's conventions:
// the normalised text spells each space as "▁" (three bytes for one), a piece covers the
// input characters its normalised bytes came from, and byte-fallback pieces of one character
// share that character's span.
func (s *SentencePiece) EncodeOffsets(text string) ([]int, [][2]int) {
	if text == "" {
		return nil, nil
	}
	var align [][2]int // normalised byte -> input span, as the library normalises
	for i, r := range text {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(text[i:])
		}
		n := size
		if r == ' ' {
			n = len("▁")
		}
		for k := 0; k < n; k++ {
			align = append(align, [2]int{i, i + size})
		}
	}
	toks := s.proc.Encode(text)
	ids := make([]int, len(toks))
	offs := make([][2]int, len(toks))
	pos := 0
	for i, t := range toks {
		n := len(t.Text)
		if t.ID >= 0 && t.ID < len(s.isByte) && s.isByte[t.ID] {
			n = 1
		}
		end := min(pos+n, len(align))
		ids[i] = t.ID
		if pos < end {
			offs[i] = [2]int{align[pos][0], align[end-1][1]}
		} else {
			offs[i] = [2]int{len(text), len(text)}
		}
		pos = end
	}
	return ids, offs
}

var _ OffsetEncoder = (*SentencePiece)(nil)

// Decode renders ids as text: control pieces render as nothing, byte pieces
// are reassembled into UTF-8, and ids outside the vocabulary are skipped.
func (s *SentencePiece) Decode(ids []int) string {
	valid := make([]int, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < s.pieces { // the library indexes without a check
			valid = append(valid, id)
		}
	}
	return s.proc.Decode(valid)
}

// VocabSize is the number of pieces.
func (s *SentencePiece) VocabSize() int { return s.pieces }

// Special reports BOS/EOS/PAD and the control/user-defined pieces by name.
func (s *SentencePiece) Special() Special { return s.special }
