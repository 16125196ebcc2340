package design

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// A brief is one design task of the loop: the policy reads its prompt and writes a layout's JSON,
// one box per colour, ids b0, b1, … in the brief's order.
type Brief struct {
	ID      string
	Colours []string
}

// Prompt is the brief as the policy reads it.
func (b Brief) Prompt() string {
	return fmt.Sprintf("layout %d boxes: %s\n", len(b.Colours), strings.Join(b.Colours, " "))
}

// Briefs draws n briefs of 3 or 4 distinct colours from seed.
func Briefs(n int, seed uint64) []Brief {
	rng := rand.New(rand.NewPCG(seed, 0xb21ef))
	out := make([]Brief, n)
	for i := range out {
		out[i] = randomBrief(rng)
		out[i].ID = fmt.Sprintf("brief%05d", i)
	}
	return out
}

// randomBrief draws a brief of 3 or 4 distinct colours (no ID).
func randomBrief(rng *rand.Rand) Brief {
	k := 3 + rng.IntN(2)
	perm := rng.Perm(len(colours))
	var b Brief
	for _, j := range perm[:k] {
		b.Colours = append(b.Colours, colours[j])
	}
	return b
}

// Plain draws a mediocre layout for b: valid JSON inside the canvas with the brief's boxes top to
// bottom, but with left edges that are shared and on the grid only by chance (a box keeps the
// previous box's edge with probability 0.35, else takes any edge from 4 to 30) and gaps that are
// sometimes negative (boxes overlap by up to 10 units). Its rule score leaves room to rise: the
// starting point of the design loop's SFT policy.
func Plain(b Brief, rng *rand.Rand) Layout {
	n := len(b.Colours)
	gaps := make([]float64, n-1)
	var sumGap float64
	for i := range gaps {
		gaps[i] = 4
		if rng.IntN(2) == 0 {
			gaps[i] = float64(rng.IntN(14) - 10) // -10..3
		}
		sumGap += gaps[i]
	}
	h := float64(int((Canvas - 2*GridStep - sumGap) / float64(n)))
	y := float64(GridStep)
	x := float64(4 + rng.IntN(27))
	var l Layout
	for i, c := range b.Colours {
		if i > 0 && rng.Float64() >= 0.35 {
			x = float64(4 + rng.IntN(27))
		}
		w := float64(GridStep * (4 + rng.IntN(4)))
		l.Boxes = append(l.Boxes, Box{ID: fmt.Sprintf("b%d", i), X: x, Y: y, W: w, H: h, Color: c})
		if i < len(gaps) {
			y += h + gaps[i]
		}
	}
	return l
}

// LoopSizes sizes the design loop's data.
type LoopSizes struct {
	SFT, Heldout               int // plain layouts to imitate; held-out briefs (with plain layouts)
	Prompts                    int // briefs for RL
	CriticTrain, CriticHeldout int
	ImageSize                  int     // the critic's input, pixels
	Noise                      float64 // label noise of the critic's pairs
	// Pairs is the critic's pair generator: "principles" (Pairs: good layouts against twins
	// that break one principle) or "varied" (VariedPairs: those, off-grid twins, and Plain
	// layouts against their repairs).
	Pairs string
	Seed  uint64
}

// pairs draws the critic's pairs with s's generator.
func (s LoopSizes) pairs(n int, seed uint64, noise float64) ([]Pair, error) {
	switch s.Pairs {
	case "principles":
		return Pairs(n, seed, noise), nil
	case "varied":
		return VariedPairs(n, seed, noise), nil
	}
	return nil, fmt.Errorf("design: pairs %q: allowed \"principles\", \"varied\"", s.Pairs)
}

// DefaultLoopSizes are the sizes of scripts/design/loop.yaml.
var DefaultLoopSizes = LoopSizes{SFT: 400, Heldout: 128, Prompts: 512, CriticTrain: 800, CriticHeldout: 200, ImageSize: 32, Noise: 0.1, Pairs: "varied", Seed: 1}

// WriteLoop writes the design loop's data into dir: sft.jsonl and heldout.jsonl (briefs with plain
// layouts: the SFT data, and the held-out briefs every evaluation measures), prompts.jsonl (the
// briefs RL draws from; other seeds than the held-out ones), and critic-train.jsonl,
// critic-heldout.jsonl with images/ (the critic's image preference pairs, from s.Pairs'
// generator). The rule score (Score) is in none of them.
func WriteLoop(dir string, s LoopSizes) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, briefs []Brief, rng *rand.Rand, completions bool) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		enc := json.NewEncoder(f)
		for _, b := range briefs {
			line := map[string]string{"id": b.ID, "prompt": b.Prompt()}
			if completions {
				line["completion"] = Plain(b, rng).JSON()
			}
			if err := enc.Encode(line); err != nil {
				f.Close()
				return err
			}
		}
		return f.Close()
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x91a1))
	if err := write("sft.jsonl", Briefs(s.SFT, s.Seed), rng, true); err != nil {
		return err
	}
	if err := write("heldout.jsonl", Briefs(s.Heldout, s.Seed+1000), rng, true); err != nil {
		return err
	}
	if err := write("prompts.jsonl", Briefs(s.Prompts, s.Seed+2000), rng, false); err != nil {
		return err
	}
	train, err := s.pairs(s.CriticTrain, s.Seed, s.Noise)
	if err != nil {
		return err
	}
	heldout, err := s.pairs(s.CriticHeldout, s.Seed+1000, 0)
	if err != nil {
		return err
	}
	if err := WritePairs(filepath.Join(dir, "critic-train.jsonl"), train, s.ImageSize, false); err != nil {
		return err
	}
	return WritePairs(filepath.Join(dir, "critic-heldout.jsonl"), heldout, s.ImageSize, true)
}
