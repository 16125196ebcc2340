package tokenize

import (
	"reflect"
	"testing"
	"testing/quick"
)

func TestByteEncode(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"", []int{}},
		{"hi", []int{104, 105}},
		{"é", []int{0xc3, 0xa9}},
		{"\x00\xff", []int{0, 255}},
		{"<eos>", []int{'<', 'e', 'o', 's', '>'}}, // names are plain bytes
	}
	for _, tc := range tests {
		if got := (Byte{}).Encode(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestByteDecodeSkipsNonBytes(t *testing.T) {
	got := Byte{}.Decode([]int{ByteBOS, 'a', BytePAD, -1, 'b', ByteEOS, 260, 1 << 20})
	if got != "ab" {
		t.Errorf("Decode = %q, want %q", got, "ab")
	}
}

func TestByteSpecial(t *testing.T) {
	var tok Tokenizer = Byte{}
	sp := tok.Special()
	if sp.BOS != 257 || sp.EOS != 258 || sp.PAD != 256 || tok.VocabSize() != 264 || tok.VocabSize()%8 != 0 {
		t.Errorf("special %+v vocab %d", sp, tok.VocabSize())
	}
	for name, want := range map[string]int{"<pad>": 256, "<bos>": 257, "<eos>": 258} {
		if id, ok := sp.ID(name); !ok || id != want {
			t.Errorf("ID(%q) = %d, %v", name, id, ok)
		}
	}
	if _, ok := sp.ID("<unk>"); ok {
		t.Error("ID(<unk>) should be absent")
	}
}

func TestByteRoundTripQuick(t *testing.T) {
	f := func(b []byte) bool { s := string(b); return Byte{}.Decode(Byte{}.Encode(s)) == s }
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Error(err)
	}
	g := func(s string) bool { return Byte{}.Decode(Byte{}.Encode(s)) == s } // valid UTF-8
	if err := quick.Check(g, nil); err != nil {
		t.Error(err)
	}
}

func FuzzByteRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a", "héllo wörld", "\x00\xff\xfe", "日本語", "\xed\xa0\x80", "a\r\n\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := Byte{}.Encode(s)
		if len(ids) != len(s) {
			t.Fatalf("%d ids for %d bytes", len(ids), len(s))
		}
		if got := (Byte{}).Decode(ids); got != s {
			t.Fatalf("round trip %q -> %q", s, got)
		}
	})
}

func TestNewSpecialDedup(t *testing.T) {
	sp := NewSpecial(1, 2, -1, []SpecialToken{{"b", 5}, {"a", 3}, {"b", 9}})
	if id, ok := sp.ID("b"); !ok || id != 5 {
		t.Errorf("ID(b) = %d, %v; want first occurrence 5", id, ok)
	}
	if id, ok := sp.ID("a"); !ok || id != 3 {
		t.Errorf("ID(a) = %d, %v", id, ok)
	}
	if _, ok := (Special{}).ID("a"); ok {
		t.Error("zero Special should know no tokens")
	}
}
