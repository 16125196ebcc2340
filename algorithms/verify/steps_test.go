package verify

import (
	"fmt"
	"testing"
)

// TestStepScores: a component's step scores are read in order up to the first missing key; other
// components' and the component's own score are not step scores.
func TestStepScores(t *testing.T) {
	p := map[string]float64{"prm": 0.2, "prm/step_000": 0.9, "prm/step_001": 0.2, "prm/step_003": 0.7, "other/step_000": 0.5}
	for _, c := range []struct {
		label string
		want  string
	}{{"prm", "[0.9 0.2]"}, {"other", "[0.5]"}, {"missing", "[]"}} {
		if got := fmt.Sprint(StepScores(p, c.label)); got != c.want {
			t.Errorf("%s: %s, want %s", c.label, got, c.want)
		}
	}
	if StepScoreKey(7) != "step_007" || StepScoreKey(123) != "step_123" {
		t.Errorf("keys %s %s", StepScoreKey(7), StepScoreKey(123))
	}
}
