package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/testbackend"
)

func randomPrompts(n, vocab, minLen, maxLen int, seed uint64) [][]int {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([][]int, n)
	for i := range out {
		l := minLen + rng.IntN(maxLen-minLen+1)
		out[i] = make([]int, l)
		for j := range out[i] {
			out[i][j] = rng.IntN(vocab)
		}
	}
	return out
}

func newGenerator(t testing.TB, cfg Config, weightStd float64) *Generator {
	t.Helper()
	store := newStore(t, cfg, randomWeights(cfg, 11, weightStd))
	gen, err := NewGenerator(testbackend.Sequential(), store.RootScope(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// TestKVCacheMatchesUncached: greedy decoding with the KV cache gives exactly the tokens of the
// recompute-everything path, on prompts of varied length, for each family; the long case grows the
// cache twice (32 → 64 → 96 columns) while decoding.
func TestKVCacheMatchesUncached(t *testing.T) {
	for _, c := range []struct {
		name                    string
		prompts, minLen, maxLen int
		newTokens               int
	}{{"short", 64, 1, 21, 12}, {"grows", 16, 1, 6, 60}} {
		for name, cfg := range tinyConfigs() {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				gen := newGenerator(t, cfg, 0.3)
				prompts := randomPrompts(c.prompts, cfg.Vocab, c.minLen, c.maxLen, 5)
				opts := sample.Options{MaxNewTokens: c.newTokens}
				cached, err := gen.Generate(prompts, opts)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := gen.GenerateUncached(prompts, opts)
				if err != nil {
					t.Fatal(err)
				}
				distinct := map[int]bool{}
				var maxLP float64
				for i := range prompts {
					if !slices.Equal(cached[i].Tokens, ref[i].Tokens) {
						t.Fatalf("prompt %d (len %d): cached %v != uncached %v", i, len(prompts[i]), cached[i].Tokens, ref[i].Tokens)
					}
					if cached[i].StopReason != sample.StopLength || len(cached[i].Tokens) != c.newTokens {
						t.Fatalf("prompt %d: %d tokens, stop %q", i, len(cached[i].Tokens), cached[i].StopReason)
					}
					for j, tk := range cached[i].Tokens {
						distinct[tk] = true
						maxLP = math.Max(maxLP, math.Abs(float64(cached[i].LogProbs[j]-ref[i].LogProbs[j])))
					}
				}
				if len(distinct) < 5 {
					t.Fatalf("degenerate model: only %d distinct tokens generated", len(distinct))
				}
				if maxLP > 1e-4 {
					t.Fatalf("cached vs uncached logprobs differ by %g", maxLP)
				}
				t.Logf("%d prompts × %d tokens identical; %d distinct tokens; max |Δlogp| %.1e", c.prompts, c.newTokens, len(distinct), maxLP)
			})
		}
	}
}

func TestSamplingDeterminism(t *testing.T) {
	cfg := tinyConfigs()["qwen2"]
	gen := newGenerator(t, cfg, 0.1)
	prompts := randomPrompts(6, cfg.Vocab, 2, 9, 8)
	run := func(ps [][]int, o sample.Options) []Completion {
		t.Helper()
		out, err := gen.Generate(ps, o)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	base := sample.Options{MaxNewTokens: 16, Temperature: 1, TopP: 0.95, Seed: 3}

	t.Run("same seed same tokens", func(t *testing.T) {
		a, b := run(prompts, base), run(prompts, base)
		for i := range a {
			if !slices.Equal(a[i].Tokens, b[i].Tokens) {
				t.Fatalf("request %d: %v vs %v", i, a[i].Tokens, b[i].Tokens)
			}
		}
	})
	t.Run("different seeds differ", func(t *testing.T) {
		o := base
		o.Seed = 4
		a, b := run(prompts, base), run(prompts, o)
		same := 0
		for i := range a {
			if slices.Equal(a[i].Tokens, b[i].Tokens) {
				same++
			}
		}
		if same == len(a) {
			t.Fatal("seeds 3 and 4 gave identical samples for every request")
		}
		// Requests of one batch draw from different streams even with one base seed.
		dup := [][]int{prompts[0], prompts[0]}
		c := run(dup, base)
		if slices.Equal(c[0].Tokens, c[1].Tokens) {
			t.Fatal("two copies of one prompt got the same sample")
		}
	})
	t.Run("per-request seed independent of batch", func(t *testing.T) {
		o := base
		o.Seeds = []uint64{42}
		alone := run(prompts[2:3], o)
		o.Seeds = []uint64{7, 8, 42, 9, 10}
		batch := run(append(randomPrompts(2, cfg.Vocab, 15, 20, 9), prompts[2], prompts[3], prompts[4]), o)
		if !slices.Equal(alone[0].Tokens, batch[2].Tokens) {
			t.Fatalf("seed 42 alone %v, in a batch %v", alone[0].Tokens, batch[2].Tokens)
		}
	})
	t.Run("top-k 1 equals greedy", func(t *testing.T) {
		o := base
		o.TopK, o.TopP, o.Temperature = 1, 0, 0.7
		a := run(prompts, o)
		g := run(prompts, sample.Options{MaxNewTokens: 16})
		for i := range a {
			if !slices.Equal(a[i].Tokens, g[i].Tokens) {
				t.Fatalf("request %d: top-k=1 %v, greedy %v", i, a[i].Tokens, g[i].Tokens)
			}
		}
	})
	t.Run("stop tokens stop", func(t *testing.T) {
		free := run(prompts, base)
		stop := free[0].Tokens[3]
		o := base
		o.StopTokens = []int{stop}
		out := run(prompts, o)
		for i, c := range out {
			k := slices.Index(free[i].Tokens, stop)
			if k < 0 {
				if c.StopReason != sample.StopLength || !slices.Equal(c.Tokens, free[i].Tokens) {
					t.Fatalf("request %d: no stop token expected, got %v (%s)", i, c.Tokens, c.StopReason)
				}
				continue
			}
			if c.StopReason != sample.StopToken || !slices.Equal(c.Tokens, free[i].Tokens[:k+1]) {
				t.Fatalf("request %d: want %v then stop, got %v (%s)", i, free[i].Tokens[:k+1], c.Tokens, c.StopReason)
			}
		}
	})
}

// TestGenerationLogProbs: the log-probs returned by generation equal TokenLogProbs recomputed by a
// full forward on prompt+completion.
func TestGenerationLogProbs(t *testing.T) {
	for name, cfg := range tinyConfigs() {
		t.Run(name, func(t *testing.T) {
			gen := newGenerator(t, cfg, 0.1)
			prompts := randomPrompts(5, cfg.Vocab, 1, 12, 13)
			out, err := gen.Generate(prompts, sample.Options{MaxNewTokens: 10, Temperature: 1.3, TopK: 20, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			tok, pos, mask, longest := paddedCompletions(prompts, out)
			exec, err := gm.NewExec(testbackend.Sequential(), gen.scope.Store(), func(scope *gm.Scope, tk, ps, mk *Node) *Node {
				return NextTokenLogProbs(Forward(scope, cfg, tk, ps, mk), tk)
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := exec.Call(tok, pos, mask)
			if err != nil {
				t.Fatal(err)
			}
			lp := tensors.MustCopyFlatData[float32](res[0]) // [batch, longest-1]
			var maxDiff, sumLP float64
			n := 0
			for i, c := range out {
				for j := range c.Tokens {
					col := longest - len(c.Tokens) + j // column of completion token j
					want := lp[i*(longest-1)+col-1]
					d := math.Abs(float64(want - c.LogProbs[j]))
					maxDiff = math.Max(maxDiff, d)
					sumLP += float64(want)
					n++
					if d > 1e-4 {
						t.Fatalf("request %d token %d: generation logp %v, recomputed %v", i, j, c.LogProbs[j], want)
					}
				}
			}
			t.Logf("%d tokens, mean logp %.3f, max |Δlogp| = %.1e", n, sumLP/float64(n), maxDiff)
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	cfg := tinyConfigs()["llama"]
	gen := newGenerator(t, cfg, 0.1)
	cases := []struct {
		name    string
		prompts [][]int
		opts    sample.Options
	}{
		{"no prompts", nil, sample.Options{MaxNewTokens: 1}},
		{"empty prompt", [][]int{{}}, sample.Options{MaxNewTokens: 1}},
		{"token out of vocab", [][]int{{cfg.Vocab}}, sample.Options{MaxNewTokens: 1}},
		{"no budget", [][]int{{1}}, sample.Options{}},
		{"too long", [][]int{{1}}, sample.Options{MaxNewTokens: cfg.MaxSeq}},
		{"seeds mismatch", [][]int{{1}}, sample.Options{MaxNewTokens: 1, Seeds: []uint64{1, 2}}},
	}
	for _, c := range cases {
		if _, err := gen.Generate(c.prompts, c.opts); err == nil {
			t.Errorf("%s: want error", c.name)
		}
	}
}

// TestStopSequence: a completion ends right after the first occurrence of a stop sequence, with
// the same tokens as the unstopped run up to there, cached and uncached alike.
func TestStopSequence(t *testing.T) {
	cfg := tinyConfigs()["llama"]
	gen := newGenerator(t, cfg, 0.3)
	prompts := randomPrompts(8, cfg.Vocab, 2, 9, 7)
	free, err := gen.Generate(prompts, sample.Options{MaxNewTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	seq := free[0].Tokens[4:6] // a two-token sequence the first prompt produces
	opts := sample.Options{MaxNewTokens: 12, StopSequences: [][]int{seq}}
	for _, uncached := range []bool{false, true} {
		run := gen.Generate
		if uncached {
			run = gen.GenerateUncached
		}
		got, err := run(prompts, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range prompts {
			want, reason := free[i].Tokens, free[i].StopReason
			for j := len(seq); j <= len(free[i].Tokens); j++ {
				if slices.Equal(free[i].Tokens[j-len(seq):j], seq) {
					want, reason = free[i].Tokens[:j], sample.StopToken
					break
				}
			}
			if !slices.Equal(got[i].Tokens, want) || got[i].StopReason != reason {
				t.Fatalf("uncached=%v prompt %d: %v (%s), want %v (%s)", uncached, i, got[i].Tokens, got[i].StopReason, want, reason)
			}
		}
	}
	if len(free[0].Tokens) < 12 || got0(t, gen, prompts, opts) > 6 {
		t.Fatalf("the first prompt did not stop at its own sequence")
	}
}

func got0(t *testing.T, gen *Generator, prompts [][]int, opts sample.Options) int {
	t.Helper()
	out, err := gen.Generate(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	return len(out[0].Tokens)
}

// TestConsumeConcurrentRows: sampling many rows on several goroutines gives each row the tokens and
// log-probabilities of one sequential loop (each row has its own seeded sampler).
func TestConsumeConcurrentRows(t *testing.T) {
	const rows, vocab, steps = 50, 37, 6
	opts := sample.Options{MaxNewTokens: steps, Temperature: 1, TopK: 5, Seed: 3}
	pl := plan{n: rows}
	prompts := make([][]int, rows)
	a, b := newRows(pl, opts, prompts), newRows(pl, opts, prompts)
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range steps {
		logits := make([]float32, rows*vocab)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64())
		}
		la := consume(a, logits, vocab, opts)
		lb := consumeRows(b, 0, rows, logits, vocab, opts)
		if la != lb {
			t.Fatalf("step %d: live %v, sequential %v", step, la, lb)
		}
	}
	for i := range rows {
		if !slices.Equal(a[i].out.Tokens, b[i].out.Tokens) || !slices.Equal(a[i].out.LogProbs, b[i].out.LogProbs) {
			t.Fatalf("row %d: %v %v, sequential %v %v", i, a[i].out.Tokens, a[i].out.LogProbs, b[i].out.Tokens, b[i].out.LogProbs)
		}
	}
}

// TestSamplingControlsCachedMatchesUncached: with every sampling control on (temperature, top-k,
// top-p, min-p, a repetition penalty that counts the prompt, stop strings read through a decoder)
// cached decoding gives the tokens, log-probs and stop reasons of the uncached reference, seeded;
// and the controls do change the samples (the comparison is not of controls that never act).
func TestSamplingControlsCachedMatchesUncached(t *testing.T) {
	cfg := tinyConfigs()["qwen2"]
	gen := newGenerator(t, cfg, 0.3)
	prompts := randomPrompts(12, cfg.Vocab, 2, 9, 4)
	// A text per token: "a" for even ids, "b" for odd ones; the stop string "bab" spans tokens.
	decode := func(ids []int) string {
		var b strings.Builder
		for _, id := range ids {
			b.WriteByte("ab"[id%2])
		}
		return b.String()
	}
	plain := sample.Options{MaxNewTokens: 14, Temperature: 0.9, Seed: 5}
	controls := plain
	controls.TopK, controls.TopP, controls.MinP, controls.RepetitionPenalty = 20, 0.95, 0.05, 1.3
	controls.StopStrings, controls.Decode = []string{"bab"}, decode
	var free []Completion
	for _, o := range []sample.Options{plain, controls} {
		cached, err := gen.Generate(prompts, o)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := gen.GenerateUncached(prompts, o)
		if err != nil {
			t.Fatal(err)
		}
		stopped := 0
		for i := range prompts {
			if !slices.Equal(cached[i].Tokens, ref[i].Tokens) || cached[i].StopReason != ref[i].StopReason {
				t.Fatalf("prompt %d: cached %v (%s), uncached %v (%s)", i, cached[i].Tokens, cached[i].StopReason, ref[i].Tokens, ref[i].StopReason)
			}
			for j := range cached[i].LogProbs {
				if d := math.Abs(float64(cached[i].LogProbs[j] - ref[i].LogProbs[j])); d > 1e-4 {
					t.Fatalf("prompt %d token %d: log-probs differ by %g", i, j, d)
				}
			}
			if o.Decode != nil && cached[i].StopReason == sample.StopToken {
				stopped++
				if text := decode(cached[i].Tokens); !strings.HasSuffix(text, "bab") || strings.Contains(text[:len(text)-1], "bab") {
					t.Fatalf("prompt %d stopped at %q: want the first \"bab\" at its end", i, text)
				}
			}
		}
		if o.Decode != nil && stopped == 0 {
			t.Fatal("no completion met the stop string: the test proves nothing")
		}
		if free == nil {
			free = cached
			continue
		}
		differ := 0
		for i := range prompts {
			n := min(len(free[i].Tokens), len(cached[i].Tokens))
			if !slices.Equal(free[i].Tokens[:n], cached[i].Tokens[:n]) {
				differ++
			}
		}
		if differ == 0 {
			t.Fatal("the controls changed no sample")
		}
	}
}
