package tokenize

// Byte tokenizer ids: 0..255 are the bytes themselves, then the control
// tokens; ids 259..263 are reserved (never produced, decoded as nothing) so
// the vocabulary is a multiple of 8, which keeps embedding rows shardable.
const (
	BytePAD       = 256
	ByteBOS       = 257
	ByteEOS       = 258
	ByteVocabSize = 264
)

// Byte is the byte-level tokenizer: one id per byte of the UTF-8 (or any)
// input. Its zero value is ready to use.
type Byte struct{}

var byteSpecial = NewSpecial(ByteBOS, ByteEOS, BytePAD, []SpecialToken{
	{"<pad>", BytePAD}, {"<bos>", ByteBOS}, {"<eos>", ByteEOS},
})

// Encode returns one id per byte; control-token names in text are bytes too.
func (Byte) Encode(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i])
	}
	return ids
}

// Decode concatenates byte ids; control and unknown ids render as nothing.
func (Byte) Decode(ids []int) string {
	b := make([]byte, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < 256 {
			b = append(b, byte(id))
		}
	}
	return string(b)
}

// VocabSize is ByteVocabSize.
func (Byte) VocabSize() int { return ByteVocabSize }

// Special names <pad>, <bos> and <eos>.
func (Byte) Special() Special { return byteSpecial }

// EncodeOffsets is Encode with each id's one-byte span.
func (b Byte) EncodeOffsets(text string) ([]int, [][2]int) {
	offsets := make([][2]int, len(text))
	for i := range offsets {
		offsets[i] = [2]int{i, i + 1}
	}
	return b.Encode(text), offsets
}

var _ OffsetEncoder = Byte{}
