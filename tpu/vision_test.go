package tpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/algorithms/vision"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

func tinyVision() visioncfg.Config {
	return visioncfg.Config{DModel: 16, Layers: 1, Heads: 2, FFN: 32, Channels: 3, ImageSize: 8, PatchSize: 4,
		Activation: "gelu", NormEps: 1e-6, UseHead: true}
}

// brightPairs are pairs whose chosen image is brighter than the rejected one (shuffle: the
// labels swap at random, so nothing is learnable).
func brightPairs(c visioncfg.Config, rows int, seed uint64, shuffle bool) objective.ImagePairBatch {
	rng := rand.New(rand.NewPCG(seed, 3))
	plane := c.Channels * c.ImageSize * c.ImageSize
	mk := func() objective.Images {
		return objective.Images{Rows: rows, Channels: c.Channels, Size: c.ImageSize, Pixels: make([]float32, rows*plane)}
	}
	b := objective.ImagePairBatch{Chosen: mk(), Rejected: mk(), Weight: make([]float32, rows)}
	for r := range rows {
		hi, lo := 0.2+0.8*rng.Float64(), -1+0.8*rng.Float64()
		if shuffle && rng.IntN(2) == 0 {
			hi, lo = lo, hi
		}
		for i := range plane {
			b.Chosen.Pixels[r*plane+i] = float32(hi + 0.1*rng.NormFloat64())
			b.Rejected.Pixels[r*plane+i] = float32(lo + 0.1*rng.NormFloat64())
		}
		b.Weight[r] = 1
	}
	return b
}

func newVision(t *testing.T, seed uint64) *VisionRuntime {
	t.Helper()
	v, err := NewVision(VisionOptions{Model: tinyVision(), Seed: seed, Optimizer: AdamW{WeightDecay: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// TestVisionRuntimeTrains: Bradley–Terry steps on learnable pairs raise held-out accuracy and
// lower the loss; on shuffled labels they do not (the test can fail); weights and optimizer state
// survive a save/load bit for bit; a wrongly sized image is an error, not a panic.
func TestVisionRuntimeTrains(t *testing.T) {
	obj := objective.VisionBradleyTerry(objectivecfg.DefaultBT())
	for _, tc := range []struct {
		name    string
		shuffle bool
		maxLoss float64 // held-out Bradley–Terry loss after training (log 2 = 0.693 at chance)
	}{{"learnable", false, 0.2}, {"shuffled", true, 10}} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVision(t, 1)
			for step := range 30 {
				if _, err := v.StepObjective(obj, brightPairs(v.Config(), 16, uint64(step), tc.shuffle), 3e-3); err != nil {
					t.Fatal(err)
				}
			}
			m, err := v.EvalObjective(obj, brightPairs(v.Config(), 64, 999, false))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("held-out accuracy %.3f loss %.3f", m["accuracy"], m["loss"])
			if float64(m["loss"]) > tc.maxLoss {
				t.Fatalf("held-out loss %.3f > %.2f", m["loss"], tc.maxLoss)
			}
			// The random tower already ranks brightness (accuracy is a sign), so shuffled labels
			// show in the loss: it stays near chance.
			if tc.shuffle && m["loss"] < 0.5 {
				t.Fatalf("shuffled labels learned something: %v", m)
			}
		})
	}
	v := newVision(t, 2)
	if _, err := v.StepObjective(obj, brightPairs(v.Config(), 4, 1, false), 1e-3); err != nil {
		t.Fatal(err)
	}
	var wbuf, obuf bytes.Buffer
	if err := v.SaveWeights(&wbuf); err != nil {
		t.Fatal(err)
	}
	if err := v.SaveOptimizer(&obuf); err != nil {
		t.Fatal(err)
	}
	w := newVision(t, 3)
	if err := w.LoadWeights(bytes.NewReader(wbuf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if err := w.LoadOptimizer(bytes.NewReader(obuf.Bytes())); err != nil {
		t.Fatal(err)
	}
	b := brightPairs(v.Config(), 4, 5, false)
	ims := make([]imageproc.Pixels, 3)
	plane := 3 * 8 * 8
	for i := range ims {
		ims[i] = imageproc.Pixels{C: 3, H: 8, W: 8, Values: b.Chosen.Pixels[i*plane : (i+1)*plane]}
	}
	rv, err := v.Rewards(ims)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := w.Rewards(ims)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rv {
		if math.Float32bits(rv[i]) != math.Float32bits(rw[i]) {
			t.Fatalf("reward %d after save/load: %g, want %g", i, rw[i], rv[i])
		}
	}
	mv, _ := v.StepObjective(obj, b, 1e-3)
	mw, _ := w.StepObjective(obj, b, 1e-3)
	if mv["loss"] != mw["loss"] || mv["grad_norm"] != mw["grad_norm"] {
		t.Fatalf("a step after save/load differs: %v vs %v", mw, mv)
	}
	if _, err := v.Rewards([]imageproc.Pixels{{C: 3, H: 4, W: 4, Values: make([]float32, 48)}}); err == nil || !strings.Contains(err.Error(), "preprocess with size 8") {
		t.Fatalf("wrong image size: %v", err)
	}
	if !Decays("vision/layers/0/attn/q") || Decays("layers/0/ln1/bias") || Decays(vision.VarScoreBias) {
		t.Fatal("decay rule: weights decay, LayerNorm and head biases do not")
	}
}
