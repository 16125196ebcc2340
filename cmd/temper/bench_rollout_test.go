package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCountsAndMedian(t *testing.T) {
	if got, err := parseCounts("1, 2"); err != nil || !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("parseCounts(1, 2) = %v, %v", got, err)
	}
	for _, bad := range []string{"0", "x", "1,", "99999"} {
		if _, err := parseCounts(bad); err == nil || !strings.Contains(err.Error(), "--rollout-workers") {
			t.Errorf("parseCounts(%q): %v, want an error naming the flag", bad, err)
		}
	}
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{4, 1, 2}, 2}, {[]float64{4, 1, 2, 3}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %g, want %g", c.xs, got, c.want)
		}
	}
}
