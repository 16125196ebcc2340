package tokenize

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitGPT2(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello world", []string{"Hello", " world"}},
		{"it's", []string{"it", "'s"}},
		{"you'll", []string{"you", "'ll"}},
		{"IT'S", []string{"IT", "'", "S"}}, // contractions are case-sensitive in GPT-2
		{"a  b", []string{"a", " ", " b"}}, // \s+(?!\S) leaves one space for " b"
		{"a  ", []string{"a", "  "}},       // trailing run is kept whole
		{"x\n\ny", []string{"x", "\n", "\n", "y"}},
		{"abc123def", []string{"abc", "123", "def"}},
		{"12345", []string{"12345"}},
		{" !!", []string{" !!"}},
		{"hi  !", []string{"hi", " ", " !"}},
		{"\t x", []string{"\t", " x"}},
		{"héllo wörld", []string{"héllo", " wörld"}},
		{"\xff\xfeab", []string{"\xff\xfe", "ab"}}, // invalid bytes are "other"
		{"a\u00a0b", []string{"a", "\u00a0", "b"}}, // NBSP is \s but not the optional ' '
	}
	for _, tc := range tests {
		if got := splitGPT2(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitGPT2(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitLlama3(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"IT'S", []string{"IT", "'S"}}, // (?i:...) contractions
		{"we'RE", []string{"we", "'RE"}},
		{"12345", []string{"123", "45"}},
		{"x  \n\ny", []string{"x", "  \n\n", "y"}},
		{"x \n", []string{"x", " \n"}},
		{"(abc", []string{"(abc"}}, // any non-letter/number/newline may prefix letters
		{"\tfoo", []string{"\tfoo"}},
		{"a, b", []string{"a", ",", " b"}},
		{"...\n\nx", []string{"...\n\n", "x"}},
		{"a  b", []string{"a", " ", " b"}},
		{"😀😀 ok", []string{"😀😀", " ok"}},
		{"  ", []string{"  "}},
		{"\n\n", []string{"\n\n"}},
		{"a\nb", []string{"a", "\n", "b"}},
	}
	for _, tc := range tests {
		if got := splitLlama3(tc.in, 3); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitLlama3(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitQwen2(t *testing.T) {
	sp, ok := splitterFor(patternQwen2)
	if !ok {
		t.Fatal("Qwen2 pattern not recognised")
	}
	if got, want := sp("ab 12345"), []string{"ab", " ", "1", "2", "3", "4", "5"}; !reflect.DeepEqual(got, want) {
		t.Errorf("qwen2 split = %q, want %q", got, want)
	}
	if _, ok := splitterFor(`\w+`); ok {
		t.Error("unknown pattern recognised")
	}
}

// Splits must partition the input exactly, whatever it is.
func FuzzSplitPartitions(f *testing.F) {
	for _, s := range []string{"", "a  b", "x\r\n\r\ny", "\xff 1234 ñ", "'s'S''"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, parts := range map[string][]string{
			"gpt2": splitGPT2(s), "llama3": splitLlama3(s, 3), "qwen2": splitLlama3(s, 1),
		} {
			if strings.Join(parts, "") != s {
				t.Fatalf("%s: %q does not rejoin to %q", name, parts, s)
			}
			for _, p := range parts {
				if p == "" {
					t.Fatalf("%s: empty piece in %q", name, parts)
				}
			}
		}
	})
}
