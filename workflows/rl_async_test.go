package workflows

import (
	"strings"
	"testing"
)

// TestDeepAsyncConfig: max_staleness, partial and segment_tokens accept what deep async runs and
// refuse the rest by name with the allowed values; the segment budget defaults to the generation
// spread over max_staleness+1 versions.
func TestDeepAsyncConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg, err string // err: substring of the error, "" for valid
		budget   int
	}{
		{`"mode":"async","max_staleness":4,"partial":true`, "", 2},
		{`"mode":"async","max_staleness":4,"partial":true,"max_new_tokens":10`, "", 2},
		{`"mode":"async","max_staleness":2,"partial":true,"max_new_tokens":7,"segment_tokens":5`, "", 5},
		{`"mode":"async","max_staleness":1,"partial":true`, "", 4},
		{`"mode":"async","max_staleness":16`, "", 0},
		{`"mode":"async","max_staleness":0`, "max_staleness: 0: want 1..16", 0},
		{`"mode":"async","max_staleness":17`, "max_staleness: 17: want 1..16", 0},
		{`"max_staleness":2`, "max_staleness: max_staleness 2, partial false: rollouts are stale only with mode async", 0},
		{`"partial":true`, "rollouts are stale only with mode async", 0},
		{`"mode":"async","segment_tokens":2`, "segment_tokens: sizes the segments of partial generations", 0},
		{`"mode":"async","partial":true,"segment_tokens":9`, "segment_tokens: 9: want 0", 0},
		{`"mode":"async","partial":true,"segment_tokens":-1`, "segment_tokens: -1", 0},
		{`"mode":"async","partial":true,"rollout":{"tools":["calc"]}`, "partial: agentic episodes", 0},
	} {
		c, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"add2"},`+tc.cfg+`}`), "config")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.cfg, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want an error with %q", tc.cfg, err, tc.err)
		case tc.err == "" && tc.budget > 0:
			if got := c.(*RLConfig).segmentTokens(); got != tc.budget {
				t.Errorf("%s: segment budget %d, want %d", tc.cfg, got, tc.budget)
			}
		}
	}
}
