package rollout

import (
	"reflect"
	"strings"
	"testing"
)

// TestPreferencePairs checks pair formation against hand-worked cases: best against worst, the first
// in file order among equals, ties and single samples skipped, groups in ascending order.
func TestPreferencePairs(t *testing.T) {
	ro := func(group ...int) []Rollout {
		rs := make([]Rollout, len(group))
		for i, g := range group {
			rs[i] = Rollout{ID: string(rune('a' + i)), Group: g}
		}
		return rs
	}
	for _, c := range []struct {
		name   string
		rs     []Rollout
		scores []float64
		want   []Pair
		stats  PairStats
	}{
		{"two-per-prompt", ro(0, 0, 1, 1), []float64{0, 1, 1, 0}, []Pair{{0, 1, 0, 1}, {1, 2, 3, 1}}, PairStats{2, 2, 0}},
		{"ties-skipped", ro(0, 0, 1, 1, 2, 2), []float64{1, 1, 0, 0, 0.5, 0}, []Pair{{2, 4, 5, 0.5}}, PairStats{3, 1, 2}},
		// k = 4: best 0.9 (index 2) against worst 0 (index 1, the first of the two zeros).
		{"best-vs-worst", ro(3, 3, 3, 3), []float64{0.5, 0, 0.9, 0}, []Pair{{3, 2, 1, 0.9}}, PairStats{1, 1, 0}},
		// Equal best scores: the first in file order is chosen.
		{"first-of-equals", ro(0, 0, 0), []float64{1, 1, -1}, []Pair{{0, 0, 2, 2}}, PairStats{1, 1, 0}},
		// Groups come in ascending order whatever the file order; a single sample is a tie.
		{"order-and-single", ro(5, 2, 5, 7), []float64{0, 3, 1, 4}, []Pair{{5, 2, 0, 1}}, PairStats{3, 1, 2}},
		{"empty", nil, nil, nil, PairStats{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, st, err := PreferencePairs(c.rs, c.scores)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) || st != c.stats {
				t.Errorf("pairs %v, stats %+v; want %v, %+v", got, st, c.want, c.stats)
			}
		})
	}
	if _, _, err := PreferencePairs(ro(0, 0), []float64{1}); err == nil {
		t.Error("1 score for 2 rollouts: want an error")
	}
	if _, _, err := PreferencePairs(ro(0, 0), []float64{1, nanScore()}); err == nil || !strings.Contains(err.Error(), "rollout b") {
		t.Errorf("NaN score: want an error naming rollout b, got %v", err)
	}
}

func nanScore() float64 {
	zero := 0.0
	return zero / zero
}
