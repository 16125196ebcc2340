package schedule

import (
	"math"
	"testing"
)

func TestWarmupCosine(t *testing.T) {
	w := WarmupCosine{Peak: 1, Warmup: 4, Total: 14, MinRatio: 0.1}
	cases := []struct {
		step int
		want float64
	}{
		{0, 0.25}, {3, 1}, {4, 1}, {9, 0.1 + 0.9*0.5}, {14, 0.1}, {100, 0.1},
	}
	for _, c := range cases {
		if got := w.At(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("At(%d) = %v, want %v", c.step, got, c.want)
		}
	}
	if got := (WarmupCosine{Peak: 2}).At(5); got != 2 {
		t.Errorf("constant schedule gave %v", got)
	}
}
