package rollout

import (
	"fmt"
	"sort"
	"strings"

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
	if full := decode(r.Tokens); !strings.HasPrefix(full, c) {
		return nil, false, fmt.Errorf("rollout %s: its completion is not the text of its %d tokens (a tool episode?): steps cannot be placed on tokens", r.ID, len(r.Tokens))
	}
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
		if k == n || !strings.HasPrefix(c, decode(r.Tokens[:k])) {
			return nil, false, fmt.Errorf("rollout %s: step %d (byte %d): its tokens do not decode prefix by prefix to the completion", r.ID, i, b)
		}
		ends[i] = k
	}
	return ends, cut, nil
}
