package workers

import (
	"testing"

	"github.com/uber-go/tally/v4"

	"github.com/temperml/temper/activities/train/trainapi"
)

// TestPolicyStepSeries: a policy step's metrics, the train–inference mismatch among them, become
// policy_* gauges (temper_policy_* on /metrics).
func TestPolicyStepSeries(t *testing.T) {
	s := tally.NewTestScope("", nil)
	recordResult(s, trainapi.PolicyStepOutput{Version: 3, Metrics: map[string]float64{"loss": 0.5,
		"mismatch_abs_mean": 4e-7, "mismatch_abs_max": 2e-6, "mismatch_fresh_abs_max": 2e-6, "mismatch_stale_k3": 0.01}})
	got := map[string]float64{}
	for _, g := range s.Snapshot().Gauges() {
		got[g.Name()] = g.Value()
	}
	for k, want := range map[string]float64{"policy_version": 3, "policy_loss": 0.5, "policy_mismatch_abs_mean": 4e-7,
		"policy_mismatch_abs_max": 2e-6, "policy_mismatch_fresh_abs_max": 2e-6, "policy_mismatch_stale_k3": 0.01} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("gauge %s = %v (present %v), want %v; gauges %v", k, v, ok, want, got)
		}
	}
}
