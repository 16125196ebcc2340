package workflows_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/workflows"
)

// TestRLRewardSpecValidation: an RL phase's reward spec may name the built-in verifiers and the ones
// the reward workers add (task with partial credit, code, critic); an unknown name is refused at the
// reward field with the allowed names, worker-side ones included.
func TestRLRewardSpecValidation(t *testing.T) {
	for _, c := range []struct {
		kind, reward string
		wantErr      []string // empty: valid
	}{
		{"grpo", `{"verifiers":[{"name":"task","params":{"partial":true}}]}`, nil},
		{"grpo", `{"verifiers":[{"name":"math"},{"name":"code","weight":0.5}]}`, nil},
		{"ppo", `{"verifiers":[{"name":"critic","params":{"checkpoint":"file:///tmp/rm/"}}]}`, nil},
		{"grpo", `{"verifiers":[{"name":"taks"}]}`, []string{`unknown verifier "taks"`, "task", "critic", "code", "math"}},
		{"grpo", `{"verifiers":[{"name":"task","params":[1]}]}`, []string{"params: want a JSON object"}},
		{"grpo", `{"verifiers":[{"name":"task","report_only":true}]}`, []string{"report_only"}},
	} {
		cfg := `{"data":{"task":"add2"},"reward":` + c.reward + `}`
		_, err := workflows.DecodePhaseConfig(c.kind, json.RawMessage(cfg), "config")
		if len(c.wantErr) == 0 {
			if err != nil {
				t.Errorf("%s %s: %v", c.kind, c.reward, err)
			}
			continue
		}
		fe, ok := err.(*config.FieldError)
		if !ok || fe.Path != "config.reward" {
			t.Errorf("%s %s: got %v, want an error at config.reward", c.kind, c.reward, err)
			continue
		}
		for _, w := range c.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: error %q does not mention %q", c.kind, c.reward, err, w)
			}
		}
	}
}
