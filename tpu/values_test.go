package tpu

import (
	"math"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/objective"
)

// TestValuesPerToken: Values reads the value head at every position; padding into a larger bucket
// changes nothing; the value at a row's last real token is the sequence reward RewardScores reports
// (the same head read by another path); a model without a value head is an error.
func TestValuesPerToken(t *testing.T) {
	cfg := tinyCfg()
	cfg.ValueHead = true
	exact := newRuntime(t, Options{Model: cfg, Seed: 4, Buckets: Buckets{Batch: []int{3}, Seq: []int{10}}})
	padded := newRuntime(t, Options{Model: cfg, Seed: 4})
	b := randomBatch(t, cfg.Vocab, 3, 10, 5)
	ve, err := exact.Values(b)
	if err != nil {
		t.Fatal(err)
	}
	vp, err := padded.Values(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ve) != 3 || len(ve[0]) != 10 {
		t.Fatalf("values %dx%d, want 3x10", len(ve), len(ve[0]))
	}
	for i := range ve {
		for j := range ve[i] {
			if d := ve[i][j] - vp[i][j]; math.Abs(float64(d)) > 1e-5 || math.IsNaN(float64(ve[i][j])) {
				t.Fatalf("value [%d,%d]: %v exact vs %v padded", i, j, ve[i][j], vp[i][j])
			}
		}
	}
	if ve[0][0] == ve[0][1] || ve[0][1] == ve[1][1] {
		t.Fatalf("values should differ across positions and rows: %v", ve)
	}
	// The reward of row i read at its last token (9) through the reward-scoring objective.
	seqs := make([][]int, len(b.Tokens))
	for i, row := range b.Tokens {
		seqs[i] = append([]int(nil), row...)
	}
	m, err := padded.EvalObjective(objective.RewardScores(3), rewardInputs(seqs, 16))
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		got := m[objective.RewardScoreName+[]string{"000", "001", "002"}[i]]
		if d := got - ve[i][9]; math.Abs(float64(d)) > 1e-5 {
			t.Errorf("row %d: reward %v, value at the last token %v", i, got, ve[i][9])
		}
	}
	plain := newRuntime(t, Options{Seed: 4})
	if _, err := plain.Values(b); err == nil || !strings.Contains(err.Error(), "no value head") {
		t.Fatalf("a model without a value head: err %v", err)
	}
}

// rewardInputs lays sequences out as objective.RewardScores wants them, right-padded with token 0 to
// seq (completion all 0: these models have no generative reward term).
func rewardInputs(seqs [][]int, seq int) objective.Sequences {
	var s objective.Sequences
	for _, q := range seqs {
		tok, pos, valid := make([]int, seq), make([]int, seq), make([]bool, seq)
		for t := range seq {
			pos[t] = t
		}
		for t, id := range q {
			tok[t], valid[t] = id, true
		}
		s.Tokens, s.Positions, s.Valid = append(s.Tokens, tok), append(s.Positions, pos), append(s.Valid, valid)
		s.Last, s.Completion = append(s.Last, len(q)-1), append(s.Completion, make([]float32, seq))
	}
	return s
}
