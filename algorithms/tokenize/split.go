package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer split patterns, implemented as hand-written scanners
// because Go's regexp has no lookahead (needed for `\s+(?!\S)`). Each
// scanner returns the length of the leftmost match at the start of s, trying
// the alternatives in order with the regex's greedy/backtracking result.
// \p{L} is unicode.IsLetter, \p{N} unicode.IsNumber, \s unicode.IsSpace (the
// Unicode White_Space property). Invalid UTF-8 bytes count as one
// "other" character each (neither space, letter nor number).
const (
	// patternGPT2 is GPT-2's split, also used by the ByteLevel pre-tokenizer
	// when use_regex is true.
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// patternLlama3 is Llama-3's (tiktoken cl100k's) split.
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternQwen2 is Qwen2's: Llama-3's with single digits.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitter cuts text into pre-tokens; nil means "no split".
type splitter func(s string) []string

// splitterFor recognises a Split regex from tokenizer.json.
func splitterFor(pattern string) (splitter, bool) {
	switch pattern {
	case patternGPT2:
		return splitGPT2, true
	case patternLlama3:
		return func(s string) []string { return splitLlama3(s, 3) }, true
	case patternQwen2:
		return func(s string) []string { return splitLlama3(s, 1) }, true
	}
	return nil, false
}

func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }
func isSpace(r rune) bool  { return unicode.IsSpace(r) }
func isOther(r rune) bool  { return !isSpace(r) && !isLetter(r) && !isNumber(r) }
func isCRLF(r rune) bool   { return r == '\r' || r == '\n' }

// decodeRune is utf8.DecodeRuneInString; an invalid byte is (RuneError, 1),
// which isOther accepts.
func decodeRune(s string) (rune, int) { return utf8.DecodeRuneInString(s) }

// runOf is the byte length of the longest prefix of s whose runes satisfy in.
func runOf(s string, in func(rune) bool) int {
	n := 0
	for n < len(s) {
		r, size := decodeRune(s[n:])
		if !in(r) {
			break
		}
		n += size
	}
	return n
}

// matchContraction matches 's 't 're 've 'm 'll 'd, case-folded when fold is set (the
// (?i:...) group): ASCII case, and ſ (U+017F), whose case-fold orbit holds s and S, as
// Oniguruma folds it.
func matchContraction(s string, fold bool) int {
	if len(s) < 2 || s[0] != '\'' {
		return 0
	}
	if fold && strings.HasPrefix(s[1:], "\u017f") {
		return 3
	}
	lower := func(c byte) byte {
		if fold && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(s[1]) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if len(s) >= 3 {
		switch string([]byte{lower(s[1]), lower(s[2])}) {
		case "re", "ve", "ll":
			return 3
		}
	}
	return 0
}

// matchTrailingSpace implements `\s+(?!\S)|\s+` at a whitespace rune: the
// whole run if it reaches the end of s, else all but its last rune (so the
// next pre-token can take one space as its prefix), else (a run of one) the
// run itself.
func matchTrailingSpace(s string) int {
	w := runOf(s, isSpace)
	if w == len(s) {
		return w
	}
	_, last := utf8.DecodeLastRuneInString(s[:w])
	if w > last {
		return w - last
	}
	return w
}

func splitWith(s string, match func(string) int) []string {
	var out []string
	for len(s) > 0 {
		n := match(s)
		if n <= 0 { // unreachable: every rune is space, letter, number or other
			n = 1
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// splitGPT2 implements patternGPT2.
func splitGPT2(s string) []string { return splitWith(s, matchGPT2) }

func matchGPT2(s string) int {
	if n := matchContraction(s, false); n > 0 {
		return n
	}
	r0, n0 := decodeRune(s)
	for _, class := range []func(rune) bool{isLetter, isNumber, isOther} { // ` ?CLASS+`
		if r0 == ' ' {
			if n := runOf(s[n0:], class); n > 0 {
				return n0 + n
			}
		}
		if n := runOf(s, class); n > 0 {
			return n
		}
	}
	return matchTrailingSpace(s)
}

// splitLlama3 implements patternLlama3 (maxDigits 3) and patternQwen2
// (maxDigits 1).
func splitLlama3(s string, maxDigits int) []string {
	return splitWith(s, func(s string) int { return matchLlama3(s, maxDigits) })
}

func matchLlama3(s string, maxDigits int) int {
	if n := matchContraction(s, true); n > 0 {
		return n
	}
	r0, n0 := decodeRune(s)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !isCRLF(r0) && !isLetter(r0) && !isNumber(r0) {
		if n := runOf(s[n0:], isLetter); n > 0 {
			return n0 + n
		}
	}
	if n := runOf(s, isLetter); n > 0 {
		return n
	}
	// \p{N}{1,maxDigits}
	if isNumber(r0) {
		n := 0
		for i := 0; i < maxDigits && n < len(s); i++ {
			r, size := decodeRune(s[n:])
			if !isNumber(r) {
				break
			}
			n += size
		}
		return n
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	start := -1
	if r0 == ' ' {
		if n := runOf(s[n0:], isOther); n > 0 {
			start = n0 + n
		}
	}
	if start < 0 {
		start = runOf(s, isOther)
	}
	if start > 0 {
		return start + runOf(s[start:], isCRLF)
	}
	// \s*[\r\n]+ : through the last CR/LF of the whitespace run.
	w := runOf(s, isSpace)
	for i := w - 1; i >= 0; i-- {
		if isCRLF(rune(s[i])) {
			return i + 1
		}
	}
	return matchTrailingSpace(s)
}
