package reward

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestPRMVerdict: the outcome of step scores by hand (min and product), the per-step scores in
// Partial, the threshold, and the weakest line named.
func TestPRMVerdict(t *testing.T) {
	for _, c := range []struct {
		scores    []float64
		outcome   string
		threshold float64
		score     float64
		pass      bool
		feedback  string
	}{
		{[]float64{0.9, 0.8, 0.95}, OutcomeMin, 0.5, 0.8, true, ""},
		{[]float64{0.9, 0.8, 0.95}, OutcomeProduct, 0.5, 0.9 * 0.8 * 0.95, true, ""},
		{[]float64{0.9, 0.8, 0.95}, OutcomeProduct, 0.7, 0.684, false, "line 2"},
		{[]float64{0.9, 0.2, 0.1}, OutcomeMin, 0.5, 0.1, false, "line 3"},
	} {
		v, err := prmVerdict(c.scores, c.outcome, c.threshold)
		if err != nil || math.Abs(v.Score-c.score) > 1e-12 || v.Pass != c.pass || !strings.Contains(v.Feedback, c.feedback) {
			t.Errorf("%v %s: %+v %v; want score %g pass %v feedback %q", c.scores, c.outcome, v, err, c.score, c.pass, c.feedback)
		}
		for i, s := range c.scores {
			if v.Partial[StepScoreKey(i)] != s {
				t.Errorf("%v: partial %v", c.scores, v.Partial)
			}
		}
	}
	if _, err := prmVerdict([]float64{math.NaN()}, OutcomeMin, 0.5); err == nil {
		t.Error("a NaN step score was judged")
	}
}

// TestPRMParams: bad params name the field and the allowed values.
func TestPRMParams(t *testing.T) {
	f := NewPRMFactory(nil, nil)
	for _, c := range []struct{ params, want string }{
		{`{"checkpoint":"runs/x"}`, "checkpoint="},
		{`{"checkpoint":"file:///x/","outcome":"mean"}`, "allowed values: min, product"},
		{`{"checkpoint":"file:///x/","threshold":1}`, "threshold=1"},
		{`{"checkpoint":"file:///x/","max_steps":-1}`, "max_steps=-1"},
	} {
		if _, err := f(json.RawMessage(c.params)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.params, err, c.want)
		}
	}
	if _, err := f(json.RawMessage(`{"checkpoint":"file:///x/","outcome":"product"}`)); err != nil {
		t.Error(err)
	}
}
