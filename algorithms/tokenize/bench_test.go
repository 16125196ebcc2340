package tokenize

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// benchText is ~100 KB: the golden corpus, joined by newlines and repeated.
func benchText(b *testing.B) string {
	var sb strings.Builder
	for sb.Len() < 100_000 {
		for _, s := range loadCorpus(b) {
			sb.WriteString(s)
			sb.WriteByte('\n')
		}
	}
	s := sb.String()[:100_000]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// BenchmarkEncode100KB times Encode of 100 KB with the real Llama 3.1 and Qwen3 files (the
// byte-level fast path: hand-written split scanners), Gemma 3 (SentencePiece-style) and the
// o200k file (the regex engine). The word cache persists across calls, as HF's does; the
// "cold" runs empty it before every call.
func BenchmarkEncode100KB(b *testing.B) {
	text := benchText(b)
	for _, name := range []string{"llama3_1", "qwen3", "gemma3", "gpt4o"} {
		for _, cold := range []bool{false, true} {
			label := name
			if cold {
				label += "/cold"
			}
			b.Run(label, func(b *testing.B) {
				tok := loadGoldenTokenizer(b, name)
				b.SetBytes(int64(len(text)))
				b.ResetTimer()
				for b.Loop() {
					if cold {
						b.StopTimer()
						tok.model.cache.words = map[string][]bpeToken{}
						b.StartTimer()
					}
					tok.Encode(text)
				}
			})
		}
	}
}
