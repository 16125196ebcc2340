package bench

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/scripts/peer"
	"github.com/temperml/temper/tpu"
)

// TestPeerMatchesTemper proves the peer is the same model as Temper's: with Temper's weights, the
// PyTorch script must compute Temper's logits, greedy generations (with both of its decode
// attention spans) and training losses over three AdamW steps. It runs Python, so it skips in
// -short and where Debian's python3-torch is not installed (scripts/peer/install.sh).
func TestPeerMatchesTemper(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PyTorch: long test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := peer.Available(ctx); err != nil {
		t.Skipf("no peer here: %v", err)
	}
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	r, err := tpu.New(tpu.Options{Model: cfg, Seed: 7, Optimizer: tpu.AdamW{WeightDecay: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	weights, err := r.ExportWeights()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	randomRows := func(n, length int) [][]int {
		rows := make([][]int, n)
		for i := range rows {
			for range length {
				rows[i] = append(rows[i], rng.IntN(cfg.Vocab))
			}
		}
		return rows
	}
	seqs, prompts := randomRows(2, 13), randomRows(3, 5)
	const newTokens, trainSteps = 6, 3
	batch, err := tpu.LMBatch(seqs, nil)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := r.Logits(batch)
	if err != nil {
		t.Fatal(err)
	}
	gens, err := r.Generate(prompts, sample.Options{MaxNewTokens: newTokens, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var losses []float32
	for range trainSteps {
		m, err := r.TrainStep(batch, 1e-3) // bench_torch.py's LR
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, m.Loss)
	}

	in, err := json.Marshal(map[string]any{"preset": "tiny", "weights": weights, "tokens": seqs, "prompts": prompts,
		"new_tokens": newTokens, "train_steps": trainSteps})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "check.json")
	if err := os.WriteFile(file, in, 0o644); err != nil {
		t.Fatal(err)
	}
	outJSON, err := peer.Check(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	type gen struct {
		Tokens   [][]int     `json:"tokens"`
		LogProbs [][]float64 `json:"logprobs"`
	}
	var out struct {
		Logits    []float64 `json:"logits"`
		Losses    []float64 `json:"losses"`
		GenFilled gen       `json:"gen_filled"`
		GenFull   gen       `json:"gen_full"`
	}
	if err := json.Unmarshal(outJSON, &out); err != nil {
		t.Fatalf("peer output: %v", err)
	}

	if len(out.Logits) != len(logits.Data) {
		t.Fatalf("peer logits: %d values, Temper %d", len(out.Logits), len(logits.Data))
	}
	worst, scale := 0.0, 0.0
	for i, v := range logits.Data {
		worst = max(worst, math.Abs(float64(v)-out.Logits[i]))
		scale = max(scale, math.Abs(float64(v)))
	}
	// float32 on both sides, different summation orders: agreement to ~1e-6 of the logits' size.
	if worst > 1e-4*max(scale, 1) {
		t.Errorf("logits differ by up to %g (largest logit %g)", worst, scale)
	}
	t.Logf("logits: max |Temper − PyTorch| = %.3g (largest |logit| %.3g)", worst, scale)

	for name, g := range map[string]gen{"filled": out.GenFilled, "full": out.GenFull} {
		for i, c := range gens {
			if len(g.Tokens) != len(gens) || !slices.Equal(c.Tokens, g.Tokens[i]) {
				t.Fatalf("generation (peer decode attends over the %s cache), prompt %d: peer %v, Temper %v", name, i, g.Tokens, c.Tokens)
			}
			for j, lp := range c.LogProbs {
				if d := math.Abs(float64(lp) - g.LogProbs[i][j]); d > 1e-4 {
					t.Errorf("generation (%s) prompt %d token %d: log-prob Temper %g, peer %g", name, i, j, lp, g.LogProbs[i][j])
				}
			}
		}
	}
	if len(out.Losses) != trainSteps {
		t.Fatalf("peer losses %v, want %d", out.Losses, trainSteps)
	}
	for i, l := range losses {
		// The first loss is the same forward pass; later ones follow AdamW updates, whose
		// m/(√v+ε) amplifies rounding differences of near-zero gradients a little.
		tol := 1e-5 * float64(l)
		if i > 0 {
			tol = 1e-3
		}
		if d := math.Abs(float64(l) - out.Losses[i]); d > tol {
			t.Errorf("training loss %d: Temper %g, peer %g (|diff| %g > %g)", i, l, out.Losses[i], d, tol)
		}
	}
	t.Logf("losses Temper %v, peer %v", losses, out.Losses)
}
