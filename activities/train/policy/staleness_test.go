package policy

import (
	"reflect"
	"testing"

	"github.com/temperml/temper/algorithms/rollout"
)

// TestStalenessStats: the histogram counts the policy's tokens by how many versions before the
// stepped one sampled them: per token for partial rollouts, per rollout otherwise, tool results
// excluded, only the tokens lengths counts (a streamed step's light rollouts have no tokens).
func TestStalenessStats(t *testing.T) {
	for _, c := range []struct {
		name    string
		rs      []rollout.Rollout
		lengths []int
		version int
		want    map[string]float64
	}{
		{"sync", []rollout.Rollout{{PolicyVersion: 3}, {PolicyVersion: 3}}, []int{2, 3}, 3,
			map[string]float64{"staleness_lag_0": 5, "staleness_mean": 0, "staleness_max": 0}},
		{"one-step-off", []rollout.Rollout{{PolicyVersion: 2}}, []int{4}, 3,
			map[string]float64{"staleness_lag_0": 0, "staleness_lag_1": 4, "staleness_mean": 1, "staleness_max": 1}},
		{"partial", []rollout.Rollout{{PolicyVersion: 1, Versions: []int{1, 1, 3, 4}}, {PolicyVersion: 4, Versions: []int{4}}}, []int{4, 1}, 4,
			map[string]float64{"staleness_lag_0": 2, "staleness_lag_1": 1, "staleness_lag_2": 0, "staleness_lag_3": 2, "staleness_mean": 7.0 / 5, "staleness_max": 3}},
		{"episode", []rollout.Rollout{{PolicyVersion: 0, Policy: []bool{true, false, false, true}}}, []int{4}, 2,
			map[string]float64{"staleness_lag_0": 0, "staleness_lag_1": 0, "staleness_lag_2": 2, "staleness_mean": 2, "staleness_max": 2}},
		{"empty", []rollout.Rollout{{PolicyVersion: 0}}, []int{0}, 0, map[string]float64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]float64{}
			stalenessStats(got, c.rs, c.lengths, c.version)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}
