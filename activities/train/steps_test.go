package train_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/workers/traintest"
)

// TestStepRowsUnlabelled: the prm verifier encodes a completion's steps without labels; StepRows
// keeps them unlabelled (it panicked slicing the nil labels, so every prm verdict was an error),
// and cuts labelled ones with their steps.
func TestStepRowsUnlabelled(t *testing.T) {
	exs := []tasks.StepExample{
		{Prompt: "1+2=", Steps: []string{"3", "done", "more"}},
		{Prompt: "1+2=", Steps: []string{"3", "done", "more"}, Labels: []bool{true, false, false}},
	}
	rows, err := train.StepRows(exs, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Labels != nil || len(rows[0].Ends) != 2 || fmt.Sprint(rows[1].Labels) != "[true false]" || len(rows[1].Ends) != 2 {
		t.Fatalf("rows %+v", rows)
	}
}

// TestPathStepRow: a search path's last step as the PRM scores it: where it starts (after the
// newline before its own, or at the path's start), its one end, and a row cut to maxSeq.
func TestPathStepRow(t *testing.T) {
	prompt, nl := []int{1, 2}, []int{10}
	cases := []struct {
		name       string
		path, nl   []int
		maxSeq     int
		start, end int
	}{
		{"one step", []int{3, 4, 10}, nl, 64, 2, 4},
		{"third step", []int{3, 10, 4, 5, 10, 6, 7, 10}, nl, 64, 7, 9},
		{"one-token step after another", []int{3, 10, 10}, nl, 64, 4, 4},
		{"two-token newline", []int{3, 7, 8, 4, 5, 7, 8}, []int{7, 8}, 64, 5, 8},
		{"cut to max_seq", []int{3, 10, 4, 5, 10}, nl, 4, 1, 3},
		{"cut inside the last step", []int{3, 10, 4, 5, 6, 10}, nl, 3, 0, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := train.PathStepRow(prompt, c.path, c.nl, c.maxSeq)
			if r.Start != c.start || fmt.Sprint(r.Ends) != fmt.Sprint([]int{c.end}) || len(r.IDs) != c.end+1 {
				t.Errorf("start %d, ends %v, %d ids; want start %d, end %d", r.Start, r.Ends, len(r.IDs), c.start, c.end)
			}
		})
	}
}

// TestStepScoresCausalWithLogProb: with the generative term (a value head with RewardLogProb), each
// step of a whole solution (StepRows, as the prm phase and the prm verifier score it) scores what
// that step scores on its path alone (PathStepRow, as the search values a new step), and the term
// counts: the same weights without it score otherwise. The completion mask reaches the graph from
// StepRow.Start: StepRows' is the prompt's length.
func TestStepScoresCausalWithLogProb(t *testing.T) {
	enc := train.Encoder()
	ex := tasks.StepExample{Prompt: "12+35=", Steps: []string{"a=7", "b=40+7", "47"}}
	rows, err := train.StepRows([]tasks.StepExample{ex}, 64, 8)
	if err != nil {
		t.Fatal(err)
	}
	promptIDs, err := enc.PromptIDs(tasks.Example{Prompt: ex.Prompt})
	if err != nil {
		t.Fatal(err)
	}
	row := rows[0]
	if row.Start != len(promptIDs) {
		t.Fatalf("StepRows start %d, want the prompt's length %d", row.Start, len(promptIDs))
	}
	b := train.StepBatch(rows, 2, 8, 64)
	for tok, m := range b.Seq.Completion[0] {
		if want := tok >= row.Start && tok < len(row.IDs); (m == 1) != want {
			t.Fatalf("completion[%d] = %g, want %v (start %d, %d ids)", tok, m, want, row.Start, len(row.IDs))
		}
	}
	cfg := traintest.TinyModel(t)
	cfg.ValueHead, cfg.RewardLogProb = true, true
	logit := func(p float64) float64 { return math.Log(p) - math.Log1p(-p) }
	score := func(c model.Config, rs []train.StepRow, steps int) [][]float64 {
		eng, err := traintest.NewEngine(train.EngineOptions{Model: c, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		out, err := train.ScoreSteps(eng, rs, 4, steps, 64, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	whole := score(cfg, rows, 8)[0]
	plainCfg := cfg
	plainCfg.RewardLogProb = false
	plain := score(plainCfg, rows, 8)[0]
	for s, end := range row.Ends {
		path := train.PathStepRow(row.IDs[:row.Start], row.IDs[row.Start:end+1], enc.Tok.Encode("\n"), 64)
		alone := score(cfg, []train.StepRow{path}, 1)[0][0]
		if d := math.Abs(logit(whole[s]) - logit(alone)); d > 1e-3 {
			t.Errorf("step %d: logit %g in the whole solution, %g on its path alone", s, logit(whole[s]), logit(alone))
		}
		if d := math.Abs(logit(whole[s]) - logit(plain[s])); d < 0.5 {
			t.Errorf("step %d: logit %g with the generative term, %g without: the term adds nothing", s, logit(whole[s]), logit(plain[s]))
		}
	}
}
