package model

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/testbackend"
)

// arrival is one request of a continuous-batching schedule: it joins before step `at` and decodes
// `tokens` greedy tokens, then leaves.
type arrival struct {
	at     int
	prompt []int
	tokens int
}

// rowTrace is what one request saw: its tokens and the logits each was chosen from.
type rowTrace struct {
	tokens []int
	logits [][]float32
}

// runSchedule drives a Decoder through arrivals (greedy decoding) and returns each request's trace,
// checking the decoder's bookkeeping on the way.
func runSchedule(t *testing.T, d *Decoder, arrivals []arrival) []rowTrace {
	t.Helper()
	out := make([]rowTrace, len(arrivals))
	idOf := map[int]int{} // decoder row → arrival
	take := func(a int, lg []float32) {
		tok := sample.Greedy(lg)
		out[a].tokens = append(out[a].tokens, tok)
		out[a].logits = append(out[a].logits, slices.Clone(lg))
	}
	vocab := d.cfg.Vocab
	for step := 0; ; step++ {
		var join []int
		for i, a := range arrivals {
			if a.at == step {
				join = append(join, i)
			}
		}
		if len(join) > 0 {
			var prompts [][]int
			for _, i := range join {
				prompts = append(prompts, arrivals[i].prompt)
			}
			ids, lg, err := d.Join(prompts)
			if err != nil {
				t.Fatal(err)
			}
			for k, id := range ids {
				idOf[id] = join[k]
				take(join[k], lg[k*vocab:(k+1)*vocab])
			}
		}
		// Rows that have all their tokens leave.
		for id, a := range idOf {
			if len(out[a].tokens) == arrivals[a].tokens {
				if err := d.Leave(id); err != nil {
					t.Fatal(err)
				}
				delete(idOf, id)
			}
		}
		later := false
		for _, a := range arrivals {
			later = later || a.at > step
		}
		if len(idOf) == 0 {
			if !later {
				return out
			}
			continue
		}
		var ids, toks []int
		for _, id := range d.Rows() {
			a := idOf[id]
			ids = append(ids, id)
			toks = append(toks, out[a].tokens[len(out[a].tokens)-1])
		}
		lg, err := d.Step(ids, toks)
		if err != nil {
			t.Fatal(err)
		}
		for k, id := range ids {
			take(idOf[id], lg[k*vocab:(k+1)*vocab])
			if n, _ := d.Len(id); n != len(arrivals[idOf[id]].prompt)+len(out[idOf[id]].tokens)-1 {
				t.Fatalf("row %d holds %d tokens, want prompt %d + fed %d", id, n, len(arrivals[idOf[id]].prompt), len(out[idOf[id]].tokens)-1)
			}
		}
	}
}

// TestDecoderMatchesGenerate: requests that join and leave a running batch at different steps get
// exactly the greedy tokens of generating each alone, with log-probabilities within 1e-4, for each
// family; the schedule grows the cache, rebuilds it on joins and halves it on leaves.
func TestDecoderMatchesGenerate(t *testing.T) {
	for name, cfg := range tinyConfigs() {
		t.Run(name, func(t *testing.T) {
			gen := newGenerator(t, cfg, 0.3)
			d, err := NewDecoder(testbackend.Sequential(), gen.scope, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ps := randomPrompts(7, cfg.Vocab, 1, 21, 17)
			arrivals := []arrival{
				{0, ps[0], 40}, // grows 32 → 64 columns
				{0, ps[1], 3},
				{2, ps[2], 12},
				{2, ps[3], 5},
				{2, ps[4], 9},
				{5, ps[5], 20},
				{30, ps[6], 4}, // joins a batch that has halved
			}
			traces := runSchedule(t, d, arrivals)
			bitsSame := 0
			for i, a := range arrivals {
				alone, err := gen.Generate([][]int{a.prompt}, sample.Options{MaxNewTokens: a.tokens})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(traces[i].tokens, alone[0].Tokens) {
					t.Fatalf("request %d (prompt %d, joins at %d): batch %v, alone %v", i, len(a.prompt), a.at, traces[i].tokens, alone[0].Tokens)
				}
				for j, lg := range traces[i].logits {
					lp := sample.LogProb(lg, traces[i].tokens[j])
					if d := math.Abs(lp - float64(alone[0].LogProbs[j])); d > 1e-4 {
						t.Fatalf("request %d token %d: logp %v, alone %v", i, j, lp, alone[0].LogProbs[j])
					}
				}
			}
			// Against the Decoder running each request alone: bit for bit?
			for i, a := range arrivals {
				solo := runSchedule(t, d, []arrival{{0, a.prompt, a.tokens}})
				same := true
				for j := range solo[0].logits {
					same = same && slices.Equal(solo[0].logits[j], traces[i].logits[j])
				}
				if same {
					bitsSame++
				}
			}
			t.Logf("%d requests: tokens equal to Generate alone; logits bit-identical to the Decoder alone for %d of them", len(arrivals), bitsSame)
		})
	}
}

// TestDecoderFamilies: on every reference checkpoint (sliding-window layers included), a prompt
// joining a batch that is already decoding continues greedily exactly as the PyTorch reference.
func TestDecoderFamilies(t *testing.T) {
	for _, fd := range loadFamilyDirs(t) {
		t.Run(filepath.Base(fd.dir), func(t *testing.T) {
			cfg, g := fd.cfg, fd.golden
			d, err := NewDecoder(testbackend.Sequential(), newStore(t, cfg, fd.weights).RootScope(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			others := randomPrompts(3, cfg.Vocab, 2, 30, 3)
			tr := runSchedule(t, d, []arrival{{0, others[0], len(g.Greedy) + 6}, {2, g.Prompt, len(g.Greedy)},
				{2, others[1], 4}, {4, others[2], 3}})
			if !slices.Equal(tr[1].tokens, g.Greedy) {
				t.Fatalf("greedy continuation in a batch %v, reference %v", tr[1].tokens, g.Greedy)
			}
		})
	}
}

func TestDecoderErrors(t *testing.T) {
	cfg := tinyConfigs()["llama"]
	gen := newGenerator(t, cfg, 0.1)
	d, err := NewDecoder(testbackend.Sequential(), gen.scope, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ids, _, err := d.Join([][]int{{1, 2}, {3}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		run  func() error
	}{
		{"join nothing", func() error { _, _, err := d.Join(nil); return err }},
		{"empty prompt", func() error { _, _, err := d.Join([][]int{{}}); return err }},
		{"token out of vocab", func() error { _, _, err := d.Join([][]int{{cfg.Vocab}}); return err }},
		{"prompt fills the context", func() error { _, _, err := d.Join([][]int{make([]int, cfg.MaxSeq)}); return err }},
		{"a live row not fed", func() error { _, err := d.Step(ids[:1], []int{1}); return err }},
		{"a row fed twice", func() error { _, err := d.Step([]int{ids[0], ids[0]}, []int{1, 1}); return err }},
		{"unknown row", func() error { _, err := d.Step([]int{ids[0], 99}, []int{1, 1}); return err }},
		{"fed token out of vocab", func() error { _, err := d.Step(ids, []int{1, -1}); return err }},
		{"leave unknown", func() error { return d.Leave(99) }},
	}
	for _, c := range cases {
		if err := c.run(); err == nil {
			t.Errorf("%s: want error", c.name)
		}
	}
	if _, err := d.Step(ids, []int{1, 2}); err != nil {
		t.Fatalf("the batch is still usable after refused calls: %v", err)
	}
}
