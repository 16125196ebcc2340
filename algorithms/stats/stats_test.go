package stats

import (
	"math"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"one", []float64{3}, 3},
		{"odd", []float64{4, 1, 2}, 2},
		{"even", []float64{4, 1, 2, 3}, 2.5},
		{"repeated", []float64{5, 5, 1, 5}, 5},
		{"negative", []float64{-1, -3, 10}, -1},
	} {
		in := slices.Clone(c.xs)
		if got := Median(in); got != c.want {
			t.Errorf("%s: Median(%v) = %g, want %g", c.name, c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("%s: Median reordered its input to %v", c.name, in)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %g, want NaN", got)
	}
}
