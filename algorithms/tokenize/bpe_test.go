package tokenize

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func loadFixture(t testing.TB, name string) *BPE {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := LoadHF(f)
	if err != nil {
		t.Fatalf("LoadHF(%s): %v", name, err)
	}
	return b
}

// testdata/gpt2_tiny.json: ids 0..255 are the byte-level characters of bytes
// 0..255 (so an unmerged byte b has id b); merges by rank: h e→he 256,
// l l→ll 257, he ll→hell 258, hell o→hello 259, Ġ w→Ġw 260, o r→or 261,
// Ġw or→Ġwor 262, l d→ld 263, Ġwor ld→Ġworld 264, Ġ Ġ→ĠĠ 266. Added:
// <|endoftext|> 265 (also in vocab), <|pad|> 267. ByteLevel pre-tokenizer
// with use_regex: the GPT-2 split.
func TestGPT2Fixture(t *testing.T) {
	b := loadFixture(t, "gpt2_tiny.json")
	tests := []struct {
		in   string
		want []int
	}{
		{"", nil},
		{"hello world", []int{259, 264}},
		{"hello hello", []int{259, 32, 259}}, // no Ġ+hello merge
		{"hellohello", []int{259, 259}},      // equal ranks: leftmost first
		{"lll", []int{257, 108}},             // overlapping equal ranks: leftmost wins
		{"hello<|endoftext|>hi", []int{259, 265, 104, 105}},
		{"<|pad|><|endoftext|>", []int{267, 265}},
		{"<|endoftext", []int{60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116}}, // a partial marker is text
		{"héllo", []int{104, 0xc3, 0xa9, 257, 111}},                                  // é has no merges: its two bytes
		{"a  b", []int{97, 32, 32, 98}},                                              // the split keeps ĠĠ apart
		{"a  ", []int{97, 266}},                                                      // ...unless the run ends the text
		{"it's", []int{105, 116, 39, 115}},
		{"\xff\x00", []int{255, 0}},
	}
	for _, tc := range tests {
		got := b.Encode(tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
		}
		// Decode reads the bytes as HF does (from_utf8_lossy): invalid UTF-8 comes back as U+FFFD.
		if back := b.Decode(got); back != lossyUTF8([]byte(tc.in)) {
			t.Errorf("Decode(Encode(%q)) = %q", tc.in, back)
		}
	}
	if b.VocabSize() != 268 {
		t.Errorf("VocabSize = %d, want 268", b.VocabSize())
	}
	sp := b.Special()
	if sp.BOS != -1 || sp.EOS != 265 || sp.PAD != 267 {
		t.Errorf("special = %+v", sp)
	}
	if id, ok := sp.ID("<|pad|>"); !ok || id != 267 {
		t.Errorf("ID(<|pad|>) = %d, %v", id, ok)
	}
	if got := b.Decode([]int{259, -5, 9999, 264}); got != "hello world" {
		t.Errorf("Decode with bad ids = %q", got)
	}
}

// testdata/llama3_tiny.json: the same byte-level base minus 'ÿ' (byte 0xff)
// and 'þ' (0xfe); merges as pairs h e→he 256, l l→ll 257, 1 2→12 258,
// 3 4→34 259, Ċ Ċ→ĊĊ 261; Ġhello 260 only reachable through ignore_merges;
// byte_fallback with <0xC3> 266 and <0xBF> 267; added <|begin_of_text|> 262,
// <|eot_id|> 263, <|start_header_id|> 264, <|end_header_id|> 265; the
// Llama-3 Split regex then ByteLevel without regex.
func TestLlama3Fixture(t *testing.T) {
	b := loadFixture(t, "llama3_tiny.json")
	tests := []struct {
		in        string
		want      []int
		roundTrip bool
	}{
		{"hello hello", []int{256, 257, 111, 260}, true}, // " hello" is a whole vocab word
		{"12345", []int{258, 51, 52, 53}, true},          // 123|45: no 3+4 merge across the split
		{"<|begin_of_text|>hi<|eot_id|>", []int{262, 104, 105, 263}, true},
		{"a\n\nb", []int{97, 261, 98}, true},
		{"x  \n\ny", []int{120, 32, 32, 261, 121}, true},
		{"\xff", []int{266, 267}, false}, // 'ÿ' is not in vocab: its UTF-8 bytes via <0xC3><0xBF>
		{"a\xfeb", []int{97, 98}, false}, // 'þ' has no fallback and no unk: dropped, as HF does
	}
	for _, tc := range tests {
		got := b.Encode(tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if back := b.Decode(got); tc.roundTrip && back != tc.in {
			t.Errorf("Decode(Encode(%q)) = %q", tc.in, back)
		}
	}
	// The file's only decoder is ByteLevel (no ByteFallback), so HF spells the fallback pieces out.
	if got := b.Decode([]int{266, 267}); got != "<0xC3><0xBF>" {
		t.Errorf("Decode(<0xC3><0xBF>) = %q", got)
	}
	sp := b.Special()
	if sp.BOS != 262 || sp.EOS != -1 || sp.PAD != -1 {
		t.Errorf("special = %+v", sp)
	}
	c, err := b.WithSpecial("<|begin_of_text|>", "<|eot_id|>", "")
	if err != nil || c.Special().EOS != 263 || c.Special().BOS != 262 || b.Special().EOS != -1 {
		t.Errorf("WithSpecial: %+v, %v (original %+v)", c.Special(), err, b.Special())
	}
	if _, err := b.WithSpecial("<nope>", "", ""); err == nil {
		t.Error("WithSpecial with an unknown token should fail")
	}
	if c, err := b.WithSpecial("", "", "he"); err != nil || c.Special().PAD != 256 || c.Special().BOS != -1 {
		t.Errorf("WithSpecial(pad=he): %+v, %v", c.Special(), err)
	}
}

func TestAddedTokenStrip(t *testing.T) {
	js := strings.Replace(minimalHF, `"added_tokens": []`,
		`"added_tokens": [{"id": 3, "content": "<m>", "lstrip": true, "rstrip": true, "special": true}]`, 1)
	b, err := LoadHF(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Encode("a  <m>  a"), []int{0, 3, 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
}

// minimalHF has vocab a=0 Ġ=1 Ġa=2 and one merge.
const minimalHF = `{
 "added_tokens": [],
 "normalizer": null,
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
 "model": {"type": "BPE", "vocab": {"a": 0, "Ġ": 1, "Ġa": 2}, "merges": ["Ġ a"]}
}`

func TestLoadHFOptions(t *testing.T) {
	tests := []struct {
		name    string
		old     string
		new     string
		in      string
		want    []int
		wantErr string
	}{
		{name: "baseline", in: "a a", want: []int{0, 2}},
		{name: "add_prefix_space", old: `"add_prefix_space": false`, new: `"add_prefix_space": true`, in: "a a", want: []int{2, 2}},
		{name: "no regex: whole text is one word", old: `"add_prefix_space": false`, new: `"add_prefix_space": false, "use_regex": false`, in: "a a", want: []int{0, 2}},
		{name: "NFC", old: `"normalizer": null`, new: `"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]}`, in: "a", want: []int{0}},
		{name: "lowercase", old: `"normalizer": null`, new: `"normalizer": {"type": "Lowercase"}`, in: "A A", want: []int{0, 2}},
		{name: "unk", old: `"merges"`, new: `"unk_token": "a", "merges"`, in: "b", want: []int{0}},
		{name: "no unk drops", in: "ba", want: []int{0}},
		{name: "no pretokenizer: the raw space has no id", old: `{"type": "ByteLevel", "add_prefix_space": false}`, new: `null`, in: "a a", want: []int{0, 0}},
		{name: "split then byte-level regex", old: `{"type": "ByteLevel", "add_prefix_space": false}`,
			new: `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false}]}`,
			in:  "a a", want: []int{0, 0}},
		{name: "split only", old: `{"type": "ByteLevel", "add_prefix_space": false}`,
			new: `{"type": "Split", "pattern": {"Regex": "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}`,
			in:  "a a", want: []int{0, 0}},
		{name: "bad json", old: `{`, new: `[`, wantErr: "load tokenizer.json"},
		{name: "wordpiece", old: `"type": "BPE"`, new: `"type": "WordPiece"`, wantErr: `model type "WordPiece"`},
		{name: "merge not in vocab", old: `["Ġ a"]`, new: `["a b"]`, wantErr: "not in vocab"},
		{name: "merge of three", old: `["Ġ a"]`, new: `["Ġ a a"]`, wantErr: "two space-separated"},
		{name: "merge object", old: `["Ġ a"]`, new: `[{"a": 1}]`, wantErr: "neither"},
		{name: "duplicate id", old: `"Ġa": 2`, new: `"Ġa": 1`, wantErr: "id 1 used"},
		{name: "negative id", old: `"Ġa": 2`, new: `"Ġa": -2`, wantErr: "negative id"},
		{name: "unk missing", old: `"merges"`, new: `"unk_token": "<unk>", "merges"`, wantErr: "unk_token"},
		{name: "normalizer", old: `"normalizer": null`, new: `"normalizer": {"type": "BertNormalizer"}`, wantErr: `normalizer "BertNormalizer" unsupported`},
		{name: "byte-level prefix space missing", old: `"add_prefix_space": false`, new: `"trim_offsets": true`, wantErr: "ByteLevel: missing add_prefix_space"},
		{name: "metaspace", old: `"type": "ByteLevel"`, new: `"type": "Metaspace"`, wantErr: `pre_tokenizer Metaspace: replacement`},
		{name: "bert pre-tokenizer", old: `"type": "ByteLevel"`, new: `"type": "BertPreTokenizer"`, wantErr: `pre_tokenizer "BertPreTokenizer" unsupported`},
		{name: "lookbehind regex", old: `{"type": "ByteLevel", "add_prefix_space": false}`,
			new:     `{"type": "Split", "pattern": {"Regex": "(?<=a)b"}, "behavior": "Isolated", "invert": false}`,
			wantErr: "lookbehind unsupported"},
		{name: "split behavior", old: `{"type": "ByteLevel", "add_prefix_space": false}`,
			new:     `{"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Bogus", "invert": false}`,
			wantErr: `behavior "Bogus" unknown`},
		{name: "dropout", old: `"merges"`, new: `"dropout": 0.1, "merges"`, wantErr: "dropout"},
		{name: "truncation", old: `"added_tokens": []`, new: `"truncation": {"max_length": 8}, "added_tokens": []`, wantErr: "truncation"},
		{name: "wordpiece decoder", old: `"normalizer": null`, new: `"normalizer": null, "decoder": {"type": "WordPiece"}`, wantErr: `decoder "WordPiece" unsupported`},
		{name: "roberta processor", old: `"normalizer": null`, new: `"normalizer": null, "post_processor": {"type": "RobertaProcessing"}`, wantErr: `post_processor "RobertaProcessing" unsupported`},
		{name: "added id mismatch", old: `"added_tokens": []`, new: `"added_tokens": [{"id": 7, "content": "a"}]`, wantErr: `declares id 7`},
		{name: "subword prefix", old: `"merges"`, new: `"continuing_subword_prefix": "##", "merges"`, wantErr: "continuing_subword_prefix"},
		{name: "empty added", old: `"added_tokens": []`, new: `"added_tokens": [{"id": 5, "content": ""}]`, wantErr: "added token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := minimalHF
			if tc.old != "" {
				if !strings.Contains(js, tc.old) {
					t.Fatalf("fixture lacks %q", tc.old)
				}
				js = strings.Replace(js, tc.old, tc.new, 1)
			}
			b, err := LoadHF(strings.NewReader(js))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "tokenize: ") {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Encode(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestNFCNormalizes(t *testing.T) {
	raw, err := os.ReadFile("testdata/gpt2_tiny.json")
	if err != nil {
		t.Fatal(err)
	}
	js := strings.Replace(string(raw), `"normalizer": null`, `"normalizer": {"type": "NFC"}`, 1)
	nfc, err := LoadHF(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	plain := loadFixture(t, "gpt2_tiny.json")
	// "e" + U+0301 combining acute composes to "é" (c3 a9) under NFC.
	if got, want := nfc.Encode("e\u0301"), []int{0xc3, 0xa9}; !reflect.DeepEqual(got, want) {
		t.Errorf("NFC Encode = %v, want %v", got, want)
	}
	if got, want := plain.Encode("e\u0301"), []int{101, 0xcc, 0x81}; !reflect.DeepEqual(got, want) {
		t.Errorf("plain Encode = %v, want %v", got, want)
	}
}

func FuzzBPERoundTrip(f *testing.F) {
	b := loadFixture(f, "gpt2_tiny.json")
	for _, s := range []string{"", "hello world", "a  b\n\n", "<|endoftext|>x<|pad|>", "\xff\x00é", "it's 123!!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// HF decodes bytes with from_utf8_lossy: valid text round-trips, invalid bytes become U+FFFD.
		if got := b.Decode(b.Encode(s)); got != lossyUTF8([]byte(s)) {
			t.Fatalf("round trip %q -> %q", s, got)
		}
	})
}

func BenchmarkBPEEncodeLongWord(b *testing.B) {
	tok := loadFixture(b, "gpt2_tiny.json")
	s := strings.Repeat("hel", 20000) // one 60 kB pre-token: the heap keeps this n log n
	for b.Loop() {
		tok.Encode(s)
	}
}

// naiveMerge is the textbook loop the heap in encodeWord must agree with:
// repeatedly merge the lowest-rank adjacent pair, leftmost on ties.
func naiveMerge(b *BPE, ids []int) []int {
	ids = append([]int(nil), ids...)
	for {
		best, at := -1, -1
		for i := 0; i+1 < len(ids); i++ {
			if m, ok := b.model.merges[pairKey(ids[i], ids[i+1])]; ok && (best < 0 || m.rank < best) {
				best, at = m.rank, i
			}
		}
		if at < 0 {
			return ids
		}
		ids[at] = b.model.merges[pairKey(ids[at], ids[at+1])].id
		ids = append(ids[:at+1], ids[at+2:]...)
	}
}

func TestEncodeWordMatchesNaive(t *testing.T) {
	b := loadFixture(t, "gpt2_tiny.json")
	alphabet := "helowrdĠ"
	rng := uint32(1)
	for n := 0; n < 3000; n++ {
		var sb strings.Builder
		for k := int(n % 17); k > 0; k-- {
			rng = rng*1664525 + 1013904223
			r := []rune(alphabet)[(rng>>16)%uint32(len([]rune(alphabet)))]
			sb.WriteRune(r)
		}
		word := sb.String()
		var start []int
		for _, r := range word {
			start = append(start, b.model.vocab[string(r)])
		}
		var got []int
		for _, t := range b.model.tokenize(word, nil) {
			got = append(got, t.id)
		}
		if want := naiveMerge(b, start); !reflect.DeepEqual(got, want) && len(want) > 0 {
			t.Fatalf("encodeWord(%q) = %v, naive %v", word, got, want)
		}
	}
}
