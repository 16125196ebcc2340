package rollout

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
)

// StepEnds returns, for each step of r's completion (step i is line i of r.Completion, as
// tasks.SolutionSteps splits it and a process reward model scores it), the index in r.Tokens of the
// token that ends it:
//
//   - a step followed by a newline ends at the token whose text holds that newline (where a
//     process reward model reads the step's score: after the step and its "\n");
//   - the last step, when no newline follows it, ends at the token holding its last byte.
//
// cut reports that the last step was cut by the token budget (r.StopReason is "length" and no
// newline ends it): the model never finished it, so a caller should not credit it as a step.
// decode is the policy's tokenizer's; the completion must be the text of r.Tokens (its stop
// token's text, if any, may follow), which holds for every sampled rollout but not for a tool
// episode (its completion is the final answer alone): that is an error.
//
//	r.Tokens: [n] → ends: [len(tasks.SolutionSteps(r.Completion))], ascending, each in [0, n)
func StepEnds(r Rollout, decode func([]int) string) (ends []int, cut bool, err error) {
	c := r.Completion
	steps := len(tasks.SolutionSteps(c))
	if steps == 0 {
		return nil, false, nil
	}
	// The stored completion went through JSON, which turns each invalid UTF-8 byte into U+FFFD (an
	// undertrained policy samples such bytes); newlines stay where they were, so the steps are
	// found in the tokens' own text, the prefix that the completion is the JSON form of.
	full := decode(r.Tokens)
	text, ok := jsonPrefix(full, len(c))
	if !ok || jsonText(text) != c {
		return nil, false, fmt.Errorf("rollout %s: its completion is not the text of its %d tokens (a tool episode?): steps cannot be placed on tokens", r.ID, len(r.Tokens))
	}
	c = text
	// The byte that ends each step: its newline, or the last byte of a last line without one.
	lines := strings.Split(c, "\n")
	at := 0
	for i := range steps {
		at += len(lines[i])
		if i == len(lines)-1 {
			ends, cut = append(ends, at-1), r.StopReason == string(sample.StopLength)
			break
		}
		ends = append(ends, at) // the newline
		at++
	}
	// The token holding byte b is the first k whose prefix tokens[:k+1] decodes past b; prefixes
	// decode to prefixes of the text, so the decoded length only grows with k.
	n := len(r.Tokens)
	for i, b := range ends {
		k := sort.Search(n, func(k int) bool { return len(decode(r.Tokens[:k+1])) > b })
		if k == n || !strings.HasPrefix(full, decode(r.Tokens[:k])) {
			return nil, false, fmt.Errorf("rollout %s: step %d (byte %d): its tokens do not decode prefix by prefix to the completion", r.ID, i, b)
		}
		ends[i] = k
	}
	return ends, cut, nil
}

// jsonText is s as a JSON round trip leaves it (encoding/json: each invalid UTF-8 byte → U+FFFD).
func jsonText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// jsonPrefix returns the prefix of s whose jsonText is n bytes long, if one is.
func jsonPrefix(s string, n int) (string, bool) {
	out := 0
	for i := 0; i < len(s); {
		if out == n {
			return s[:i], true
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			out += len("\uFFFD")
		} else {
			out += size
		}
		i += size
	}
	return s, out == n
}
