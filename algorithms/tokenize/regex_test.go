package tokenize

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRegexFindAll(t *testing.T) {
	tests := []struct {
		pattern, in string
		want        [][2]int
	}{
		{`a+`, "baaab", [][2]int{{1, 4}}},
		{`a+?`, "aa", [][2]int{{0, 1}, {1, 2}}},
		{`\s+(?!\S)|\s+`, "a   b", [][2]int{{1, 3}, {3, 4}}}, // lookahead leaves one space for "b"
		{`\s+(?!\S)`, "a  ", [][2]int{{1, 3}}},
		{`(?=b)`, "ab", [][2]int{{1, 1}}},               // an empty match
		{`x*`, "axb", [][2]int{{0, 0}, {1, 2}, {3, 3}}}, // empty matches, none right after a match
		{`\p{N}{1,3}`, "12345", [][2]int{{0, 3}, {3, 5}}},
		{`\p{N}{1,3}+`, "12345", [][2]int{{0, 5}}}, // Ruby syntax: a repeated interval, not possessive
		{`a++a`, "aaa", nil},                       // possessive
		{`(?>a+)a`, "aaa", nil},                    // atomic
		{`(?i:'s|'t)`, "'S'T's'ſ", [][2]int{{0, 2}, {2, 4}, {4, 6}, {6, 9}}},
		{`(?i)k`, "kK\u212a", [][2]int{{0, 1}, {1, 2}, {2, 5}}}, // Kelvin sign folds to k
		{`[^\s\p{L}\p{N}]+`, "ab!?12 .", [][2]int{{2, 4}, {7, 8}}},
		{`[\p{Lu}\p{Lt}]+[\p{Ll}]*`, "HTTPServer ǅx", [][2]int{{0, 10}, {11, 14}}},
		{`[一-龥]+`, "ab中文cd", [][2]int{{2, 8}}},
		{`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+`, "x.Net a-b [x", [][2]int{{1, 5}, {7, 9}, {10, 12}}},
		{`\d+`, "a١٢3", [][2]int{{1, 6}}}, // \d is Unicode Nd
		{`\w+`, "héllo_1 wörld", [][2]int{{0, 8}, {9, 15}}},
		{`\h+`, "0xBEEFg", [][2]int{{0, 1}, {2, 6}}}, // \h is a hex digit in Oniguruma
		{`^a|b$`, "a\nab\nb", [][2]int{{0, 1}, {2, 3}, {3, 4}, {5, 6}}},
		{`\Aa|a\z`, "aaa", [][2]int{{0, 1}, {2, 3}}},
		{`.`, "a\n", [][2]int{{0, 1}}},
		{`\bx`, "x ax x", [][2]int{{0, 1}, {5, 6}}},
		{`[^a]`, "ab", [][2]int{{1, 2}}},
		{`(?i:[^a])`, "aAb", [][2]int{{2, 3}}}, // fold, then complement
		{`x{2}`, "xxxxx", [][2]int{{0, 2}, {2, 4}}},
		{`x{,2}y`, "xxxy", [][2]int{{1, 4}}},
		{`a{`, "a{", [][2]int{{0, 2}}}, // a literal brace
		{`\x41\u0042\x{43}`, "ABC", [][2]int{{0, 3}}},
		{`(?:ab|a)(?:c|bc)`, "abc", [][2]int{{0, 3}}},
		{`(a|ab)(c|bcd)`, "abcd", [][2]int{{0, 4}}}, // leftmost-first alternation with backtracking
		{`\s`, "\u00a0\u3000\u2028\u0085x", [][2]int{{0, 2}, {2, 5}, {5, 8}, {8, 10}}},
		{`\P{L}`, "a1", [][2]int{{1, 2}}},
		{`\p{^L}`, "a1", [][2]int{{1, 2}}},
		{`\p{Han}+`, "x漢字y", [][2]int{{1, 7}}},
		{`(?#comment)a`, "ba", [][2]int{{1, 2}}},
	}
	for _, tc := range tests {
		re, err := compileRegex(tc.pattern)
		if err != nil {
			t.Errorf("compileRegex(%q): %v", tc.pattern, err)
			continue
		}
		if got := re.findAll(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("findAll(%q, %q) = %v, want %v", tc.pattern, tc.in, got, tc.want)
		}
	}
}

func TestRegexRefuses(t *testing.T) {
	tests := []struct{ pattern, want string }{
		{`(?<=a)b`, "lookbehind"},
		{`(a)\1`, "backreference"},
		{`[a&&b]`, "intersection"},
		{`[[:alpha:]]`, "POSIX"},
		{`\p{Bogus}`, `property "Bogus"`},
		{`(?m)a`, "option"},
		{`(a`, "missing )"},
		{`a)`, "unexpected"},
		{`[a`, "missing ]"},
		{`*a`, "without operand"},
		{`\G`, `escape \G`},
		{`\q`, `escape \q`},
		{`[z-a]`, "empty range"},
		{`(?i)ß`, "multi-character case fold"},
		{`(?i:[a-zß])`, "multi-character case fold"},
		{`(?i:ss)`, "which one character folds to"},
	}
	for _, tc := range tests {
		_, err := compileRegex(tc.pattern)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "supported:") {
			t.Errorf("compileRegex(%q) = %v, want an error about %q listing what is supported", tc.pattern, err, tc.want)
		}
	}
}

// TestScannersMatchRegex proves the hand-written fast paths equal the general engine on the
// patterns they replace, over the golden corpus and strings built from its pieces.
func TestScannersMatchRegex(t *testing.T) {
	texts := loadCorpus(t)
	rng := uint32(9)
	alphabet := []string{" ", "  ", "\t", "\n", "\r\n", "\u00a0", "a", "Z", "é", "中", "'s", "'S", "'ll", "1", "23",
		"!", "?!", "😀", "\u0301", "\u3000", "x", "\xff", "'", "ſ"}
	for n := 0; n < 2000; n++ {
		var sb strings.Builder
		for k := n % 23; k >= 0; k-- {
			rng = rng*1664525 + 1013904223
			sb.WriteString(alphabet[(rng>>16)%uint32(len(alphabet))])
		}
		texts = append(texts, sb.String())
	}
	for _, pattern := range []string{patternGPT2, patternLlama3, patternQwen2} {
		sp, ok := splitterFor(pattern)
		if !ok {
			t.Fatalf("no scanner for %q", pattern)
		}
		re, err := compileRegex(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range texts {
			if got, want := (scannerMatcher{sp}).findAll(s), re.findAll(s); !reflect.DeepEqual(got, want) {
				t.Errorf("pattern %.20q on %q: scanner %v, regex %v", pattern, s, got, want)
				break
			}
		}
	}
}

func TestLossyUTF8(t *testing.T) {
	tests := []struct{ in, want string }{
		{"abc", "abc"},
		{"\xff", "\ufffd"},
		{"a\xf0\x9f\x98", "a\ufffd"}, // a truncated 4-byte sequence is one maximal subpart
		{"\xf0\x9f\x98\xf0\x9f\x98\x80", "\ufffd😀"},
		{"\xe0\x80", "\ufffd\ufffd"},           // E0 80: 80 cannot follow E0
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"}, // a surrogate
		{"\xc3\x28", "\ufffd("},
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
	}
	for _, tc := range tests {
		if got := lossyUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRegexGoldens checks the engine against Oniguruma itself: the non-empty matches the Rust
// tokenizers report for each pattern and text of scripts/goldens/tokenizers/regexes.js.
func TestRegexGoldens(t *testing.T) {
	r := openGz(t, "regex.golden.json.gz")
	defer r.Close()
	var cases []struct {
		Pattern string   `json:"pattern"`
		Text    string   `json:"text"`
		Matches [][2]int `json:"matches"`
	}
	if err := json.NewDecoder(r).Decode(&cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 500 {
		t.Fatalf("%d regex cases", len(cases))
	}
	// Oniguruma's multi-character case folds (ß matching "ss") are refused by name instead.
	refused := map[string]bool{"(?i)ß": true, "(?i)[kß]+": true}
	bad := 0
	for _, c := range cases {
		re, err := compileRegex(c.Pattern)
		if refused[c.Pattern] {
			if err == nil || !strings.Contains(err.Error(), "multi-character case fold") {
				t.Errorf("compileRegex(%q) = %v, want a refusal", c.Pattern, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("compileRegex(%q): %v", c.Pattern, err)
			bad++
			continue
		}
		var got [][2]int
		for _, m := range re.findAll(c.Text) {
			if m[0] < m[1] {
				got = append(got, m)
			}
		}
		if !sameSpans(got, c.Matches) {
			bad++
			if bad <= 10 {
				t.Errorf("findAll(%q, %q) = %v, Oniguruma %v", c.Pattern, c.Text, got, c.Matches)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases disagree with Oniguruma", bad, len(cases))
	}
}

func sameSpans(a, b [][2]int) bool { return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b) }
