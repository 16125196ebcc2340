package sample

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestGreedyAndLogProb(t *testing.T) {
	cases := []struct {
		logits []float32
		want   int
	}{
		{[]float32{0, 3, 1}, 1},
		{[]float32{2, 2, 1}, 0}, // ties → lowest id
		{[]float32{-5, -4, -4.5}, 1},
	}
	for _, c := range cases {
		if got := Greedy(c.logits); got != c.want {
			t.Errorf("Greedy(%v) = %d, want %d", c.logits, got, c.want)
		}
		s := NewSampler(Options{MaxNewTokens: 1}, 1)
		if got := s.Next(c.logits); got != c.want {
			t.Errorf("greedy sampler(%v) = %d, want %d", c.logits, got, c.want)
		}
	}
	if lp := LogProb([]float32{0, 0}, 1); math.Abs(lp+math.Ln2) > 1e-12 {
		t.Errorf("LogProb uniform = %v", lp)
	}
	if lp := LogProb([]float32{1000, 0}, 1); math.Abs(lp+1000) > 1e-9 {
		t.Errorf("LogProb stable = %v", lp)
	}
}

// freqs samples n tokens and returns their frequencies.
func freqs(o Options, logits []float32, n int) []float64 {
	s := NewSampler(o, 99)
	f := make([]float64, len(logits))
	for range n {
		f[s.Next(logits)]++
	}
	for i := range f {
		f[i] /= float64(n)
	}
	return f
}

func TestSamplingDistributions(t *testing.T) {
	logits := []float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.15)), float32(math.Log(0.05))}
	const n = 40000
	cases := []struct {
		name string
		o    Options
		want []float64
	}{
		{"temperature 1", Options{Temperature: 1}, []float64{0.5, 0.3, 0.15, 0.05}},
		{"top-k 2", Options{Temperature: 1, TopK: 2}, []float64{0.625, 0.375, 0, 0}},
		{"top-p 0.8", Options{Temperature: 1, TopP: 0.8}, []float64{0.625, 0.375, 0, 0}},
		{"top-p 0.81", Options{Temperature: 1, TopP: 0.81}, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
		{"top-p 0.1 keeps one", Options{Temperature: 1, TopP: 0.1}, []float64{1, 0, 0, 0}},
		{"temperature 0.5", Options{Temperature: 0.5}, sq([]float64{0.5, 0.3, 0.15, 0.05})},
		{"top-k then top-p", Options{Temperature: 1, TopK: 3, TopP: 0.5}, []float64{1, 0, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.MaxNewTokens = 1
			got := freqs(c.o, logits, n)
			for i := range got {
				if math.Abs(got[i]-c.want[i]) > 0.01 {
					t.Fatalf("freqs %v, want %v", got, c.want)
				}
			}
		})
	}
}

// sq returns p² renormalized: the distribution at temperature 0.5.
func sq(p []float64) []float64 {
	var z float64
	out := make([]float64, len(p))
	for i, v := range p {
		out[i] = v * v
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

func TestSeeds(t *testing.T) {
	logits := make([]float32, 50)
	o := Options{MaxNewTokens: 1, Temperature: 1}
	draw := func(seed uint64) []int {
		s := NewSampler(o, seed)
		var out []int
		for range 20 {
			out = append(out, s.Next(logits))
		}
		return out
	}
	a, b, c := draw(1), draw(1), draw(2)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatalf("seed 1: %v / %v, seed 2: %v", a, b, c)
	}
	if o.SeedFor(0) == o.SeedFor(1) {
		t.Error("requests 0 and 1 share a seed")
	}
	o.Seeds = []uint64{5, 6}
	if o.SeedFor(1) != 6 {
		t.Error("explicit seed ignored")
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]Options{
		"max_new_tokens": {},
		"temperature":    {MaxNewTokens: 1, Temperature: -1},
		"top_k":          {MaxNewTokens: 1, TopK: -1},
		"top_p":          {MaxNewTokens: 1, TopP: 1.5},
		"seeds":          {MaxNewTokens: 1, Seeds: []uint64{1}},
	}
	for field, o := range bad {
		if err := o.Validate(2); err == nil {
			t.Errorf("%s: want error", field)
		}
	}
	if err := (Options{MaxNewTokens: 3, Temperature: 0.7, TopK: 5, TopP: 0.9}).Validate(2); err != nil {
		t.Error(err)
	}
	if !(Options{StopTokens: []int{2, 3}}).IsStop(3) {
		t.Error("IsStop")
	}
}

func TestStopSequences(t *testing.T) {
	o := Options{MaxNewTokens: 4, StopSequences: [][]int{{7, 8, 9}, {5}}}
	for _, c := range []struct {
		toks []int
		want bool
	}{{nil, false}, {[]int{9}, false}, {[]int{8, 9}, false}, {[]int{7, 8, 9}, true}, {[]int{1, 7, 8, 9}, true},
		{[]int{7, 8, 9, 1}, false}, {[]int{5}, true}, {[]int{5, 6}, false}} {
		if got := o.EndsWithStop(c.toks); got != c.want {
			t.Errorf("EndsWithStop(%v) = %v, want %v", c.toks, got, c.want)
		}
	}
	if err := (Options{MaxNewTokens: 1, StopSequences: [][]int{{1}, {}}}).Validate(1); err == nil || !strings.Contains(err.Error(), "stop_sequences") {
		t.Errorf("an empty stop sequence: %v", err)
	}
}
