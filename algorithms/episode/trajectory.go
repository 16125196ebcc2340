package episode

import (
	"fmt"
	"slices"
)

// Call is one model call of an agent as a gateway recorded it, token ids in and out: the prompt the
// server tokenised (or was given), the tokens it sampled (a final stop token included) and their
// behaviour log-probabilities, and the policy version that served it.
type Call struct {
	Prompt   []int     `json:"prompt"`
	Tokens   []int     `json:"tokens"`
	LogProbs []float32 `json:"logprobs"`
	Version  int       `json:"version"`
}

// Segment is one context an agent's calls grew: the prompt of its first call, then every token
// after it, parallel with Policy (true: sampled by the policy, trained on, with its behaviour
// log-probability; false: written by the agent between two calls — a tool's result, the chat
// template's markers — with log-probability 0).
type Segment struct {
	Prompt   []int     `json:"prompt"`
	Tokens   []int     `json:"tokens"`
	Policy   []bool    `json:"policy"`
	LogProbs []float32 `json:"logprobs"`
	Calls    int       `json:"calls"` // model calls merged into the segment
}

// Assemble turns an episode's calls, in the order they were made, into trajectory segments. A call
// whose prompt extends the current segment's context (its prompt and tokens so far) continues the
// segment: the tokens the agent added in between are appended unmasked, then the call's completion
// masked as the policy's. Any other call — the agent rewrote or dropped part of the history, or
// started over — begins a new segment, so no token is ever trained on under a context the model did
// not see. Tokens are taken as recorded, never re-tokenised. Calls of different policy versions
// are refused: an episode is served by one policy.
func Assemble(calls []Call) ([]Segment, error) {
	var segs []Segment
	for i, c := range calls {
		switch {
		case len(c.Prompt) == 0:
			return nil, fmt.Errorf("episode: assemble: call %d has an empty prompt", i)
		case len(c.Tokens) != len(c.LogProbs):
			return nil, fmt.Errorf("episode: assemble: call %d: %d log-probs for %d tokens", i, len(c.LogProbs), len(c.Tokens))
		case i > 0 && c.Version != calls[0].Version:
			return nil, fmt.Errorf("episode: assemble: call %d was served by policy version %d, call 0 by %d: an episode has one policy", i, c.Version, calls[0].Version)
		}
		if n := len(segs); n > 0 && extends(c.Prompt, segs[n-1]) {
			s := &segs[n-1]
			added := c.Prompt[len(s.Prompt)+len(s.Tokens):]
			s.Tokens = append(s.Tokens, added...)
			for range added {
				s.Policy = append(s.Policy, false)
				s.LogProbs = append(s.LogProbs, 0)
			}
			s.append(c)
			continue
		}
		s := Segment{Prompt: slices.Clone(c.Prompt), Tokens: []int{}, Policy: []bool{}, LogProbs: []float32{}}
		s.append(c)
		segs = append(segs, s)
	}
	return segs, nil
}

// append adds a call's completion to s as the policy's tokens.
func (s *Segment) append(c Call) {
	s.Tokens = append(s.Tokens, c.Tokens...)
	s.LogProbs = append(s.LogProbs, c.LogProbs...)
	for range c.Tokens {
		s.Policy = append(s.Policy, true)
	}
	s.Calls++
}

// extends reports whether prompt begins with s's whole context (prompt and tokens).
func extends(prompt []int, s Segment) bool {
	n := len(s.Prompt)
	if len(prompt) < n+len(s.Tokens) {
		return false
	}
	return slices.Equal(prompt[:n], s.Prompt) && slices.Equal(prompt[n:n+len(s.Tokens)], s.Tokens)
}
