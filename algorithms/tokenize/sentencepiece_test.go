package tokenize

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

var update = flag.Bool("update", false, "rewrite testdata/tiny_sp.model")

type spTestPiece struct {
	text  string
	score float32
	typ   uint64
}

// tinySPPieces is a Gemma-shaped vocabulary: <pad> 0, <eos> 1, <bos> 2,
// <unk> 3, user-defined <start_of_turn> 4 and <end_of_turn> 5, the 256
// byte pieces <0x00>..<0xFF> at 6..261 (so byte b is id 6+b), then normal
// pieces. SentencePiece BPE merges the adjacent pair whose concatenation
// has the highest score, leftmost first.
func tinySPPieces() []spTestPiece {
	p := []spTestPiece{
		{"<pad>", 0, spControl}, {"<eos>", 0, spControl}, {"<bos>", 0, spControl},
		{"<unk>", 0, spUnknown},
		{"<start_of_turn>", 0, spUserDefined}, {"<end_of_turn>", 0, spUserDefined},
	}
	for b := 0; b < 256; b++ {
		p = append(p, spTestPiece{fmt.Sprintf("<0x%02X>", b), 0, 6})
	}
	for _, n := range []spTestPiece{
		{"h", -10, 1}, {"e", -11, 1}, {"l", -12, 1}, {"o", -13, 1}, // 262..265
		{"▁", -14, 1}, {"w", -15, 1}, {"r", -16, 1}, {"d", -17, 1}, // 266..269
		{"he", -1, 1}, {"ll", -2, 1}, {"hell", -3, 1}, {"hello", -4, 1}, // 270..273
		{"▁w", -5, 1}, {"or", -6, 1}, {"▁wor", -7, 1}, {"ld", -8, 1}, // 274..277
		{"▁world", -9, 1}, // 278
	} {
		p = append(p, n)
	}
	return p
}

type spSpec struct {
	modelType    uint64
	byteFallback bool
	dummyPrefix  *bool // nil: field absent
	normalizer   bool
}

// buildSPModel serializes a ModelProto by hand with protowire:
// pieces (1){piece 1, score 2, type 3}, trainer_spec (2){model_type 3,
// byte_fallback 35, unk_id 40, bos_id 41, eos_id 42, pad_id 43},
// normalizer_spec (3){name 1, add_dummy_prefix 3, remove_extra_whitespaces 4,
// escape_whitespaces 5}.
func buildSPModel(pieces []spTestPiece, s spSpec) []byte {
	var out []byte
	for _, p := range pieces {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, p.text)
		m = protowire.AppendTag(m, 2, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.score))
		m = protowire.AppendTag(m, 3, protowire.VarintType)
		m = protowire.AppendVarint(m, p.typ)
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, m)
	}
	varint := func(b []byte, num protowire.Number, v uint64) []byte {
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, v)
	}
	boolean := func(v bool) uint64 {
		if v {
			return 1
		}
		return 0
	}
	var ts []byte
	ts = varint(ts, 3, s.modelType)
	ts = varint(ts, 35, boolean(s.byteFallback))
	ts = varint(ts, 40, 3)
	ts = varint(ts, 41, 2)
	ts = varint(ts, 42, 1)
	ts = varint(ts, 43, 0)
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendBytes(out, ts)
	if s.normalizer {
		var ns []byte
		ns = protowire.AppendTag(ns, 1, protowire.BytesType)
		ns = protowire.AppendString(ns, "identity")
		if s.dummyPrefix != nil {
			ns = varint(ns, 3, boolean(*s.dummyPrefix))
		}
		ns = varint(ns, 4, 0)
		ns = varint(ns, 5, 1)
		out = protowire.AppendTag(out, 3, protowire.BytesType)
		out = protowire.AppendBytes(out, ns)
	}
	return out
}

func gemmaLike() spSpec {
	f := false
	return spSpec{modelType: 2, byteFallback: true, dummyPrefix: &f, normalizer: true}
}

// TestTinySPFixture keeps testdata/tiny_sp.model equal to what
// buildSPModel produces (go test -run TinySPFixture -update rewrites it).
func TestTinySPFixture(t *testing.T) {
	want := buildSPModel(tinySPPieces(), gemmaLike())
	if *update {
		if err := os.WriteFile("testdata/tiny_sp.model", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("testdata/tiny_sp.model")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("testdata/tiny_sp.model is stale; run go test -run TinySPFixture -update")
	}
}

// tinySP loads the committed testdata/tiny_sp.model.
func tinySP(t *testing.T) *SentencePiece {
	t.Helper()
	f, err := os.Open("testdata/tiny_sp.model")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sp, err := LoadSentencePiece(f)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestSentencePiece(t *testing.T) {
	sp := tinySP(t)
	var tok Tokenizer = sp
	tests := []struct {
		in   string
		want []int
	}{
		{"", nil},
		// h e l l o ▁ w o r l d: he(-1) ll(-2) hell(-3) hello(-4) ▁w(-5)
		// or(-6) ▁wor(-7) ld(-8) ▁world(-9).
		{"hello world", []int{273, 278}},
		{"hello  ", []int{273, 266, 266}},
		{"<start_of_turn>hello<end_of_turn>", []int{4, 273, 5}},
		{"hi", []int{262, 6 + 'i'}},                               // 'i' is no piece: byte fallback
		{"é", []int{6 + 0xc3, 6 + 0xa9}},                          // both UTF-8 bytes
		{"wow", []int{267, 265, 267}},                             // no "wo"/"ow" pieces
		{"<bos>", []int{6 + '<', 6 + 'b', 265, 6 + 's', 6 + '>'}}, // control pieces are never matched in text
	}
	for _, tc := range tests {
		got := tok.Encode(tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if back := tok.Decode(got); back != tc.in {
			t.Errorf("Decode(Encode(%q)) = %q", tc.in, back)
		}
	}
	if got := tok.Decode([]int{2, 273, 278, 1, -1, 100000, 0}); got != "hello world" {
		t.Errorf("Decode with control and bad ids = %q", got)
	}
	if tok.VocabSize() != 279 {
		t.Errorf("VocabSize = %d", tok.VocabSize())
	}
	s := tok.Special()
	if s.BOS != 2 || s.EOS != 1 || s.PAD != 0 {
		t.Errorf("special = %+v", s)
	}
	for name, want := range map[string]int{"<start_of_turn>": 4, "<end_of_turn>": 5, "<bos>": 2, "<unk>": 3} {
		if id, ok := s.ID(name); !ok || id != want {
			t.Errorf("ID(%q) = %d, %v", name, id, ok)
		}
	}
	if _, ok := s.ID("hello"); ok {
		t.Error("normal pieces are not special")
	}
}

func TestLoadSentencePieceRejects(t *testing.T) {
	tr := true
	unigram := gemmaLike()
	unigram.modelType = 1
	dummy := gemmaLike()
	dummy.dummyPrefix = &tr
	unset := gemmaLike()
	unset.dummyPrefix = nil
	noNorm := gemmaLike()
	noNorm.normalizer = false
	noFallback := gemmaLike()
	noFallback.byteFallback = false
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"garbage", []byte{0xff, 0xff, 0xff}, "bad protobuf"},
		{"empty", nil, "no pieces"},
		{"unigram", buildSPModel(tinySPPieces(), unigram), "model type 1"},
		{"dummy prefix", buildSPModel(tinySPPieces(), dummy), "add_dummy_prefix=false"},
		{"unset dummy prefix", buildSPModel(tinySPPieces(), unset), "must set"},
		{"no normalizer", buildSPModel(tinySPPieces(), noNorm), "must set"},
		{"byte pieces without fallback", buildSPModel(tinySPPieces(), noFallback), "byte_fallback"},
		{"no unk", buildSPModel(tinySPPieces()[4:], gemmaLike()), "unk"},
	}
	for _, tc := range tests {
		_, err := LoadSentencePiece(bytes.NewReader(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "tokenize: load sentencepiece") {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestSentencePieceOffsets: spans in bytes of the input, with a space's "▁" mapped back to the
// space and byte-fallback pieces of one character sharing its span (HF's conventions, as the
// gemma3 goldens show them for the tokenizer.json form of the same model family).
func TestSentencePieceOffsets(t *testing.T) {
	sp := tinySP(t)
	tests := []struct {
		in   string
		ids  []int
		offs [][2]int
	}{
		{"", nil, nil},
		{"hello world", []int{273, 278}, [][2]int{{0, 5}, {5, 11}}},
		{"hello  ", []int{273, 266, 266}, [][2]int{{0, 5}, {5, 6}, {6, 7}}},
		{"<start_of_turn>hello<end_of_turn>", []int{4, 273, 5}, [][2]int{{0, 15}, {15, 20}, {20, 33}}},
		{"hé w", []int{262, 6 + 0xc3, 6 + 0xa9, 274}, [][2]int{{0, 1}, {1, 3}, {1, 3}, {3, 5}}},
	}
	for _, tc := range tests {
		ids, offs := sp.EncodeOffsets(tc.in)
		if !reflect.DeepEqual(ids, tc.ids) || !reflect.DeepEqual(offs, tc.offs) {
			t.Errorf("EncodeOffsets(%q) = %v %v, want %v %v", tc.in, ids, offs, tc.ids, tc.offs)
		}
		if enc := sp.Encode(tc.in); !reflect.DeepEqual(enc, ids) {
			t.Errorf("Encode(%q) = %v, EncodeOffsets ids %v", tc.in, enc, ids)
		}
	}
}
