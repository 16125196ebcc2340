// Package rollout is the rollouts file format shared by the rollout, reward and trainer roles: one JSON
// line per sampled completion, with the behaviour policy's per-token log-probs and version, so a trainer
// can correct for staleness (truncated importance sampling) and a reward worker can verify each sample.
package rollout

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// Rollout is one sampled completion of one prompt.
type Rollout struct {
	ID    string `json:"id"`    // unique within the file
	Group int    `json:"group"` // index of the prompt; the G samples of a prompt share it
	Task  string `json:"task,omitempty"`
	// Prompt and Answer are the example's text and reference answer (checked by the task).
	Prompt    string          `json:"prompt"`
	Answer    string          `json:"answer,omitempty"`
	Reference json.RawMessage `json:"reference,omitempty"` // verifier reference (verify.Sample)
	// PromptTokens and Tokens (the completion, final stop token included) are what the policy saw and
	// sampled; LogProbs[i] = log π_behaviour(Tokens[i] | ...).
	PromptTokens  []int     `json:"prompt_tokens"`
	Tokens        []int     `json:"tokens"`
	LogProbs      []float32 `json:"logprobs"`
	Completion    string    `json:"completion"`
	StopReason    string    `json:"stop_reason"`
	PolicyVersion int       `json:"policy_version"`
	// Attempt counts self-corrections: 0 is the first sample; k > 0 was regenerated with Feedback.
	Attempt  int    `json:"attempt,omitempty"`
	Feedback string `json:"feedback,omitempty"`
	// Policy, set for an agentic episode, marks the tokens the policy wrote (parallel to Tokens);
	// the others are tool results, with log-prob 0, which no loss trains on. Unset: every token is
	// the policy's. Completion is then the episode's final answer.
	Policy []bool   `json:"policy,omitempty"`
	Ep     *Episode `json:"episode,omitempty"`
	// Segments, set for an agent's episode whose calls did not all extend one context, are its
	// further segments: each its own prompt and tokens, trained as a row of its own with the
	// episode's advantage (PromptTokens, Tokens, LogProbs and Policy above are the first).
	Segments []Segment `json:"segments,omitempty"`
	// Versions, set for a partial rollout (generated over several policy versions, each segment
	// continuing the last under newer weights), is the policy version that sampled each token
	// (parallel to Tokens); LogProbs[i] is that version's. Unset: every token is PolicyVersion's.
	// PolicyVersion is then the oldest of them.
	Versions []int `json:"versions,omitempty"`
}

// StopPartial is the StopReason of a row a segment left unfinished: the next segment continues it.
const StopPartial = "partial"

// VersionOf is the policy version that sampled token i of r.
func (r *Rollout) VersionOf(i int) int {
	if r.Versions == nil {
		return r.PolicyVersion
	}
	return r.Versions[i]
}

// Segment is one further context of an agent's episode (Rollout.Segments): Policy, LogProbs and
// Tokens are parallel as in a Rollout.
type Segment struct {
	PromptTokens []int     `json:"prompt_tokens"`
	Tokens       []int     `json:"tokens"`
	LogProbs     []float32 `json:"logprobs"`
	Policy       []bool    `json:"policy"`
}

// Episode summarises an agentic rollout for metrics and `temper samples`.
type Episode struct {
	Turns      int    `json:"turns"`
	ToolCalls  int    `json:"tool_calls"`
	ToolErrors int    `json:"tool_errors"`
	Checked    bool   `json:"checked,omitempty"`      // called the `check` tool
	CheckPass  bool   `json:"check_passed,omitempty"` // its last check passed
	End        string `json:"end"`                    // answer | turns | tokens | agent
	Transcript string `json:"transcript"`             // everything after the prompt, decoded
	// Of an agent's episode: its model calls (Turns counts them too), and the agent processes
	// started for it (1 + the retries of failed or timed-out ones).
	Calls    int `json:"calls,omitempty"`
	Attempts int `json:"attempts,omitempty"`
}

// Trained reports whether token i of r is trained on (the policy's).
func (r *Rollout) Trained(i int) bool { return r.Policy == nil || r.Policy[i] }

// Write writes rollouts as JSON lines.
func Write(w io.Writer, rs []Rollout) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range rs {
		if err := enc.Encode(&rs[i]); err != nil {
			return fmt.Errorf("rollout: write %s: %w", rs[i].ID, err)
		}
	}
	return bw.Flush()
}

// Read reads rollouts written by Write; name labels errors.
func Read(r io.Reader, name string) ([]Rollout, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var out []Rollout
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var ro Rollout
		if err := json.Unmarshal(sc.Bytes(), &ro); err != nil {
			return nil, fmt.Errorf("rollout: %s:%d: %w", name, line, err)
		}
		if len(ro.LogProbs) != len(ro.Tokens) {
			return nil, fmt.Errorf("rollout: %s:%d: %d log-probs for %d tokens", name, line, len(ro.LogProbs), len(ro.Tokens))
		}
		if ro.Policy != nil && len(ro.Policy) != len(ro.Tokens) {
			return nil, fmt.Errorf("rollout: %s:%d: policy mask of %d for %d tokens", name, line, len(ro.Policy), len(ro.Tokens))
		}
		if ro.Versions != nil && len(ro.Versions) != len(ro.Tokens) {
			return nil, fmt.Errorf("rollout: %s:%d: versions of %d for %d tokens", name, line, len(ro.Versions), len(ro.Tokens))
		}
		for k, s := range ro.Segments {
			if len(s.LogProbs) != len(s.Tokens) || len(s.Policy) != len(s.Tokens) || len(s.PromptTokens) == 0 {
				return nil, fmt.Errorf("rollout: %s:%d: segment %d: %d prompt tokens, %d tokens, %d log-probs, policy mask of %d: want a prompt and one log-prob and mask entry per token",
					name, line, k+1, len(s.PromptTokens), len(s.Tokens), len(s.LogProbs), len(s.Policy))
			}
		}
		out = append(out, ro)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rollout: %s:%d: %w", name, line+1, err)
	}
	return out, nil
}

// Groups returns the indices of rs grouped by Group, groups in ascending order and samples in file order.
func Groups(rs []Rollout) [][]int {
	idx := map[int][]int{}
	var keys []int
	for i, r := range rs {
		if _, ok := idx[r.Group]; !ok {
			keys = append(keys, r.Group)
		}
		idx[r.Group] = append(idx[r.Group], i)
	}
	sort.Ints(keys)
	out := make([][]int, len(keys))
	for i, k := range keys {
		out[i] = idx[k]
	}
	return out
}
