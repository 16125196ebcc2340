package sample

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

// TestDistributionMatchesTransformers: the distribution Next draws from, with a repetition penalty,
// temperature, top-k, top-p and min-p in every combination the golden file holds, is transformers'
// (testdata/warpers.json, written by testdata/warpers.py, a PyTorch re-implementation of its logits
// processors in its order).
func TestDistributionMatchesTransformers(t *testing.T) {
	raw, err := os.ReadFile("testdata/warpers.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Name              string    `json:"name"`
			Logits            []float32 `json:"logits"`
			Seen              []int     `json:"seen"`
			Probs             []float64 `json:"probs"`
			Temperature       float64   `json:"temperature"`
			TopK              int       `json:"top_k"`
			TopP              float64   `json:"top_p"`
			MinP              float64   `json:"min_p"`
			RepetitionPenalty float64   `json:"repetition_penalty"`
		}
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Cases) < 5 {
		t.Fatalf("%d golden cases", len(golden.Cases))
	}
	for _, c := range golden.Cases {
		t.Run(c.Name, func(t *testing.T) {
			o := Options{MaxNewTokens: 1, Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP, RepetitionPenalty: c.RepetitionPenalty}
			if err := o.Validate(1); err != nil {
				t.Fatal(err)
			}
			s := NewSampler(o, 1)
			s.Observe(c.Seen...)
			got := s.Distribution(c.Logits)
			for i := range got {
				if math.Abs(got[i]-c.Probs[i]) > 1e-6 {
					t.Errorf("token %d: p = %.7f, transformers %.7f\n got %v\nwant %v", i, got[i], c.Probs[i], got, c.Probs)
					break
				}
			}
		})
	}
}

// TestNextDrawsFromDistribution: Next samples the distribution Distribution reports, penalising the
// tokens it drew itself as well as those observed.
func TestNextDrawsFromDistribution(t *testing.T) {
	logits := []float32{2, 1.5, 1, 0.5, -1, -2}
	for _, o := range []Options{{Temperature: 1, MinP: 0.2}, {Temperature: 0.8, RepetitionPenalty: 1.5, TopK: 4}} {
		const n = 40000
		ref := NewSampler(o, 3)
		ref.Observe(0, 4)
		want := ref.Distribution(logits)
		f := make([]float64, len(logits))
		for i := range n {
			s := NewSampler(o, uint64(i))
			s.Observe(0, 4)
			f[s.Next(logits)]++
		}
		for i := range f {
			if math.Abs(f[i]/n-want[i]) > 0.01 {
				t.Errorf("%+v: token %d drawn %.4f of the time, distribution %.4f", o, i, f[i]/n, want[i])
			}
		}
	}
	// A drawn token is penalised at the next step: greedy with a strong penalty does not repeat a
	// token while an unseen one has a positive logit.
	s := NewSampler(Options{RepetitionPenalty: 100}, 1)
	seen := map[int]bool{}
	for range 4 {
		tok := s.Next(logits)
		if seen[tok] {
			t.Fatalf("greedy with penalty 100 repeated token %d", tok)
		}
		seen[tok] = true
	}
	// Off (0 or 1), the penalty changes nothing: the same tokens as without it.
	for _, p := range []float64{0, 1} {
		a, b := NewSampler(Options{Temperature: 1}, 9), NewSampler(Options{Temperature: 1, RepetitionPenalty: p}, 9)
		b.Observe(0, 1, 2)
		for range 50 {
			if x, y := a.Next(logits), b.Next(logits); x != y {
				t.Fatalf("repetition_penalty %g changed a draw: %d vs %d", p, x, y)
			}
		}
	}
}

// TestStopStrings: a completion stops when its text comes to contain a stop string, however its
// tokens split it, and only then.
func TestStopStrings(t *testing.T) {
	// Tokens are pieces of text; token 9 is a two-byte character split over tokens 7 and 8.
	pieces := map[int]string{1: "ab", 2: "c", 3: "</", 4: "tool>", 5: "x", 6: "</tool>", 7: "\xc3", 8: "\xa9"}
	decode := func(ids []int) string {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(pieces[id])
		}
		return b.String()
	}
	o := Options{MaxNewTokens: 8, StopStrings: []string{"</tool>", "bc", "é"}, Decode: decode}
	if err := o.Validate(1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		toks []int
		want bool
	}{{nil, false}, {[]int{5}, false}, {[]int{5, 3}, false}, {[]int{5, 3, 4}, true}, {[]int{6}, true}, {[]int{1}, false},
		{[]int{1, 2}, true}, {[]int{5, 5, 5, 5, 5, 5, 5, 5, 1, 2}, true}, {[]int{7}, false}, {[]int{7, 8}, true}} {
		if got := o.EndsWithStop(c.toks); got != c.want {
			t.Errorf("EndsWithStop(%q) = %v, want %v", decode(c.toks), got, c.want)
		}
	}
}

// TestValidateSamplingControls: bad min_p, repetition_penalty and stop_strings name their field.
func TestValidateSamplingControls(t *testing.T) {
	dec := func([]int) string { return "" }
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{MaxNewTokens: 1, MinP: -0.1}, "min_p"},
		{Options{MaxNewTokens: 1, MinP: 1.5}, "min_p"},
		{Options{MaxNewTokens: 1, RepetitionPenalty: -1}, "repetition_penalty"},
		{Options{MaxNewTokens: 1, RepetitionPenalty: math.Inf(1)}, "repetition_penalty"},
		{Options{MaxNewTokens: 1, StopStrings: []string{"a", ""}, Decode: dec}, "stop_strings"},
		{Options{MaxNewTokens: 1, StopStrings: []string{"a"}}, "stop_strings"},
		{Options{MaxNewTokens: 1, MinP: 0.1, RepetitionPenalty: 1.1, StopStrings: []string{"a"}, Decode: dec}, ""},
	} {
		err := c.o.Validate(1)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want an error naming %q", c.o, err, c.want)
		}
	}
}
