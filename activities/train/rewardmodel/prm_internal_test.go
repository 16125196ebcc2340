package rewardmodel

import (
	"math"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/objective"
)

// TestStepMetrics: PRMEvaluate's metrics against hand-counted cases, above all that a PRM calling
// every step wrong gets the share of wrong steps as step accuracy but 0.5 as balanced accuracy.
func TestStepMetrics(t *testing.T) {
	rows := func(labels ...[]bool) []train.StepRow {
		out := make([]train.StepRow, len(labels))
		for i, l := range labels {
			out[i] = train.StepRow{Labels: l}
		}
		return out
	}
	for _, c := range []struct {
		name   string
		rows   []train.StepRow
		scores [][]float64
		want   map[string]float64
	}{
		{
			name:   "every step called wrong, 1 of 4 right",
			rows:   rows([]bool{true, false}, []bool{false, false}),
			scores: [][]float64{{0.1, 0.2}, {0.3, 0.4}},
			want: map[string]float64{"heldout_step_accuracy": 0.75, "heldout_step_accuracy_correct": 0, "heldout_step_accuracy_wrong": 1,
				"heldout_balanced_accuracy": 0.5, "heldout_positive": 0.25, "heldout_steps": 4, "heldout_solutions": 2, "heldout_solution_accuracy": 1},
		},
		{
			// Row 0: right step called right, wrong step called right (min 0.6 > 0.5, min label wrong: the
			// solution is misjudged); row 1: a right step called wrong, a right one called right.
			name:   "mixed",
			rows:   rows([]bool{true, false}, []bool{true, true}),
			scores: [][]float64{{0.9, 0.6}, {0.2, 0.7}},
			want: map[string]float64{"heldout_step_accuracy": 0.5, "heldout_step_accuracy_correct": 2.0 / 3, "heldout_step_accuracy_wrong": 0,
				"heldout_balanced_accuracy": 1.0 / 3, "heldout_positive": 0.75, "heldout_solution_accuracy": 0},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := stepMetrics(c.rows, c.scores)
			for k, v := range c.want {
				if math.Abs(got[k]-v) > 1e-12 {
					t.Errorf("%s = %g, want %g", k, got[k], v)
				}
			}
		})
	}
	// One label only: no balanced accuracy (nothing to balance), no accuracy of the missing label.
	got := stepMetrics(rows([]bool{false, false}), [][]float64{{0.1, 0.9}})
	for _, k := range []string{"heldout_balanced_accuracy", "heldout_step_accuracy_correct"} {
		if _, ok := got[k]; ok {
			t.Errorf("only wrong steps: %s = %g, want no such metric", k, got[k])
		}
	}
}

// TestClassWeights: balance labels counts the steps the rows keep (after max_steps and max_seq),
// none and "" (an input recorded before the field) weigh every step 1.
func TestClassWeights(t *testing.T) {
	rs := []train.StepRow{{Labels: []bool{true, false, false}}, {Labels: []bool{false}}}
	for _, c := range []struct {
		balance string
		want    objective.ClassWeights
	}{
		{trainapi.PRMBalanceLabels, objective.ClassWeights{Correct: 2, Wrong: 4.0 / 6}},
		{trainapi.PRMBalanceNone, objective.ClassWeights{}},
		{"", objective.ClassWeights{}},
	} {
		got := classWeights(trainapi.PRMLoss{Balance: c.balance}, rs)
		if math.Abs(got.Correct-c.want.Correct) > 1e-12 || math.Abs(got.Wrong-c.want.Wrong) > 1e-12 {
			t.Errorf("balance %q: %+v, want %+v", c.balance, got, c.want)
		}
	}
	if err := (trainapi.PRMLoss{Balance: "inverse"}).Validate(); err == nil {
		t.Error("balance inverse validated")
	}
}
