package rollout

import (
	"fmt"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// toyDecode decodes ids of a vocabulary of strings (several bytes a token, a newline inside one).
func toyDecode(vocab []string) func([]int) string {
	return func(ids []int) string {
		var b strings.Builder
		for _, id := range ids {
			if id >= 0 && id < len(vocab) {
				b.WriteString(vocab[id])
			}
		}
		return b.String()
	}
}

// byteRollout is a completion sampled by the byte tokenizer, its stop token kept when stop.
func byteRollout(c string, stop bool) Rollout {
	toks := tokenize.Byte{}.Encode(c)
	reason := "length"
	if stop {
		toks, reason = append(toks, tokenize.ByteEOS), "stop"
	}
	return Rollout{ID: "r", Completion: c, Tokens: toks, StopReason: reason}
}

// TestStepEnds: each step ends on the token holding its newline, a last line without one on its
// last byte's token (never the stop token), a last line cut by the budget is reported cut; blank
// lines inside are steps, trailing ones are not (tasks.SolutionSteps); tokens of several bytes map
// to the token holding the byte. Ends are hand-computed token indices.
func TestStepEnds(t *testing.T) {
	byteDec := tokenize.Byte{}.Decode
	toy := []string{"ab", "\n", "c\nd", "e", "\n\n"}
	for _, c := range []struct {
		name string
		r    Rollout
		dec  func([]int) string
		ends []int
		cut  bool
	}{
		{"newline ends both", byteRollout("a\nbc\n", true), byteDec, []int{1, 4}, false},
		{"last line ends at its last byte", byteRollout("12\n3", true), byteDec, []int{2, 3}, false},
		{"last line cut by the budget", byteRollout("12\n3", false), byteDec, []int{2, 3}, true},
		{"cut after a newline is whole", byteRollout("12\n3\n", false), byteDec, []int{2, 4}, false},
		{"blank lines inside are steps", byteRollout("\n\nx", true), byteDec, []int{0, 1, 2}, false},
		{"trailing blank lines are not", byteRollout("x  \n  \n", false), byteDec, []int{3}, false},
		{"one line, stop token", byteRollout("42", true), byteDec, []int{1}, false},
		{"empty", byteRollout("", true), byteDec, nil, false},
		// "ab" "\n" "c\nd" "e": lines ab | c | de; the second newline is inside token 2.
		{"multi-byte tokens", Rollout{ID: "t", Completion: "ab\nc\nde", Tokens: []int{0, 1, 2, 3}, StopReason: "stop"}, toyDecode(toy), []int{1, 2, 3}, false},
		// "ab" "\n\n" "e": lines ab | (blank) | e; both newlines are token 1.
		// Invalid UTF-8 bytes: the stored completion holds U+FFFD (3 bytes) for each; the ends are
		// still the tokens': "\xff" "\n" "\xfe" "7" → lines (FFFD) | (FFFD)7.
		{"invalid UTF-8 through JSON", Rollout{ID: "u", Completion: "\uFFFD\n\uFFFD7", Tokens: []int{0xff, '\n', 0xfe, '7', tokenize.ByteEOS}, StopReason: "stop"}, byteDec, []int{1, 3}, false},
		{"two newlines in one token", Rollout{ID: "t", Completion: "ab\n\ne", Tokens: []int{0, 4, 3}, StopReason: "length"}, toyDecode(toy), []int{1, 1, 2}, true},
	} {
		ends, cut, err := StepEnds(c.r, c.dec)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if fmt.Sprint(ends) != fmt.Sprint(c.ends) || cut != c.cut {
			t.Errorf("%s: ends %v cut %v, want %v cut %v", c.name, ends, cut, c.ends, c.cut)
		}
		if n := len(tasks.SolutionSteps(c.r.Completion)); len(ends) != n {
			t.Errorf("%s: %d ends for %d steps", c.name, len(ends), n)
		}
	}
	for _, c := range []struct {
		name string
		r    Rollout
	}{
		{"completion is not the tokens' text", Rollout{ID: "x", Completion: "final answer", Tokens: tokenize.Byte{}.Encode("call tool\n")}},
		{"tokens shorter than the completion", Rollout{ID: "x", Completion: "12\n3", Tokens: tokenize.Byte{}.Encode("12")}},
	} {
		if _, _, err := StepEnds(c.r, byteDec); err == nil || !strings.Contains(err.Error(), "rollout x") {
			t.Errorf("%s: %v, want an error naming the rollout", c.name, err)
		}
	}
}
