package advantage

import (
	"slices"
	"strings"
	"testing"
)

func TestOverlongPenalty(t *testing.T) {
	cfg := OverlongConfig{MaxLen: 10, CacheLen: 4, Penalty: 1} // free up to 6, buffer (6, 10]
	cases := []struct {
		length int
		want   float64
	}{
		{0, 0}, {5, 0}, {6, 0}, {7, -0.25}, {8, -0.5}, {9, -0.75}, {10, -1}, {11, -1}, {1000, -1},
	}
	for _, c := range cases {
		if got := OverlongPenalty(c.length, cfg); !close64(got, c.want) {
			t.Errorf("length %d: %g, want %g", c.length, got, c.want)
		}
	}
	half := OverlongConfig{MaxLen: 10, CacheLen: 4, Penalty: 0.5}
	if got := OverlongPenalty(8, half); !close64(got, -0.25) {
		t.Errorf("penalty 0.5, length 8: %g, want −0.25", got)
	}
	paper := DefaultOverlongConfig() // L_max 20480, L_cache 4096: free up to 16384
	for length, want := range map[int]float64{16384: 0, 16384 + 1024: -0.25, 20480: -1, 20481: -1} {
		if got := OverlongPenalty(length, paper); !close64(got, want) {
			t.Errorf("paper, length %d: %g, want %g", length, got, want)
		}
	}
}

func TestShapeOverlong(t *testing.T) {
	cfg := OverlongConfig{MaxLen: 10, CacheLen: 4, Penalty: 1}
	rewards := []float64{1, 1, 0, 1}
	got, err := ShapeOverlong(rewards, []int{3, 8, 12, 10}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{1, 0.5, -1, 0}; !slices.EqualFunc(got, want, close64) {
		t.Errorf("shaped %v, want %v", got, want)
	}
	if rewards[1] != 1 {
		t.Error("ShapeOverlong modified its input")
	}
	errs := []struct {
		err  error
		want string
	}{
		{func() error { _, err := ShapeOverlong([]float64{1}, []int{1, 2}, cfg); return err }(), "1 rewards for 2 lengths"},
		{func() error { _, err := ShapeOverlong([]float64{1}, []int{-1}, cfg); return err }(), "length -1"},
		{OverlongConfig{MaxLen: 10, CacheLen: 11, Penalty: 1}.Validate(), "cache_len=11"},
		{OverlongConfig{MaxLen: 0, CacheLen: 1, Penalty: 1}.Validate(), "max_len=0"},
		{OverlongConfig{MaxLen: 10, CacheLen: 2, Penalty: -1}.Validate(), "penalty=-1"},
	}
	for _, c := range errs {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("error %v, want %q", c.err, c.want)
		}
	}
}

func TestFilterGroups(t *testing.T) {
	cases := []struct {
		name    string
		groups  [][]float64
		keep    []int
		dropped int
	}{
		{"mixed", [][]float64{{1, 1, 1}, {0, 1, 0}, {0, 0}, {2}, {}, {0.5, 0.5000001}}, []int{1, 5}, 4},
		{"all solved", [][]float64{{1, 1}, {1, 1}}, nil, 2},
		{"none dropped", [][]float64{{0, 1}, {1, 0, 0, 0}}, []int{0, 1}, 0},
		{"empty batch", nil, nil, 0},
	}
	for _, c := range cases {
		keep, dropped := FilterGroups(c.groups)
		if !slices.Equal(keep, c.keep) || dropped != c.dropped {
			t.Errorf("%s: keep %v dropped %d, want %v %d", c.name, keep, dropped, c.keep, c.dropped)
		}
	}
}
