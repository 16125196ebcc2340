package agenttest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Response is the part of one chat completion the tests compare: each choice's finish reason and
// its tokens (byte-level: one byte each) with their log-probabilities.
type Response struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Logprobs     struct {
			Content []struct {
				Bytes   []int   `json:"bytes"`
				Logprob float32 `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
}

// Responses decodes an agent's log, one response a line; a line that is not a response with
// exactly one choice is an error naming it.
func Responses(log string) ([]Response, error) {
	var out []Response
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		var resp Response
		if err := json.Unmarshal([]byte(l), &resp); err != nil {
			return nil, fmt.Errorf("agent log line %q: %w", l, err)
		}
		if len(resp.Choices) != 1 {
			return nil, fmt.Errorf("agent log line %q: %d choices, want 1", l, len(resp.Choices))
		}
		out = append(out, resp)
	}
	return out, nil
}
