package tpu

import (
	"math"
	"testing"

	"github.com/temperml/temper/algorithms/sample"
)

// TestSampledLogProbsMatchTrainer: the log-probs the generator records for sampled tokens (the
// behaviour policy of RL) equal what LogProbs, the trainer's path, computes on prompt+completion with
// the same weights, for prompts of different lengths batched together. RL's importance ratios and
// TIS assume this; a mismatch (positions, padding, cache) would bias every policy update.
func TestSampledLogProbsMatchTrainer(t *testing.T) {
	r := newRuntime(t, Options{Seed: 5})
	prompts := [][]int{{1, 5, 6, 7, 8}, {1, 9}, {1, 20, 21, 22}, {1, 3, 4}}
	comps, err := r.Generate(prompts, sample.Options{MaxNewTokens: 6, Temperature: 1, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	var seqs [][]int
	var plen []int
	for i, c := range comps {
		if len(c.Tokens) != len(c.LogProbs) || len(c.Tokens) == 0 {
			t.Fatalf("completion %d: %d tokens, %d log-probs", i, len(c.Tokens), len(c.LogProbs))
		}
		seqs = append(seqs, append(append([]int{}, prompts[i]...), c.Tokens...))
		plen = append(plen, len(prompts[i])-1) // targets from index len(prompt)-1 are completion tokens
	}
	b, err := LMBatch(seqs, plen)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := r.LogProbs(b)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, c := range comps {
		for k := range c.Tokens {
			got, want := float64(lp[i][len(prompts[i])-1+k]), float64(c.LogProbs[k])
			worst = math.Max(worst, math.Abs(got-want))
			if math.Abs(got-want) > 1e-3 {
				t.Errorf("request %d token %d (%d): trainer log-prob %v, generator %v", i, k, c.Tokens[k], got, want)
			}
		}
	}
	t.Logf("max |Δ log-prob| %.2g", worst)
}
