package tpu

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
)

func TestTrainLearns(t *testing.T) {
	r := newRuntime(t, Options{Seed: 1})
	b := randomBatch(t, r.Config().Vocab, 4, 16, 3)
	var first, last StepMetrics
	for i := range 30 {
		m, err := r.TrainStep(b, 1e-2)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = m
		}
		last = m
	}
	if first.Tokens != 4*16 || first.GradNorm <= 0 {
		t.Fatalf("first step %+v: want 64 tokens and a positive grad norm", first)
	}
	if !(last.Loss < first.Loss*0.7) {
		t.Fatalf("loss %.4f → %.4f after 30 steps on one batch: not learning", first.Loss, last.Loss)
	}
	t.Logf("loss %.4f → %.4f", first.Loss, last.Loss)
}

// TestTrainFamilies: every family feature trains (gemma's (1+w) norms and scaled embeddings,
// qwen2's biases and untied head, an unused value head that gets zero gradients).
func TestTrainFamilies(t *testing.T) {
	gemma, qwen, critic := familyCfgs()
	for name, cfg := range map[string]model.Config{"gemma": gemma, "qwen2": qwen, "value head": critic} {
		t.Run(name, func(t *testing.T) {
			r := newRuntime(t, Options{Model: cfg, Seed: 1, Optimizer: AdamW{WeightDecay: 0.01}})
			b := randomBatch(t, cfg.Vocab, 2, 8, 2)
			ms := trainSteps(t, r, []data.TokenBatch{b, b, b, b, b, b, b, b, b, b}, 1e-2)
			if !(ms[9].Loss < ms[0].Loss) || math.IsNaN(float64(ms[9].Loss)) {
				t.Fatalf("loss %v → %v", ms[0].Loss, ms[9].Loss)
			}
		})
	}
}

// TestTrainDeterministic: same seed and batches → bit-identical weights (sequential executor).
func TestTrainDeterministic(t *testing.T) {
	var batches []data.TokenBatch
	for i := range 4 {
		batches = append(batches, randomBatch(t, tinyCfg().Vocab, 3, 12, uint64(10+i)))
	}
	run := func() (map[string][]float32, []StepMetrics) {
		r := newRuntime(t, Options{Seed: 7, Optimizer: AdamW{WeightDecay: 0.1}})
		m := trainSteps(t, r, batches, 3e-3)
		return exportWeights(t, r), m
	}
	w1, m1 := run()
	w2, m2 := run()
	if k := bitsEqual(w1, w2); k != "" {
		t.Fatalf("weights differ after 4 steps at %q", k)
	}
	for i := range m1 {
		if m1[i].Loss != m2[i].Loss || m1[i].GradNorm != m2[i].GradNorm {
			t.Fatalf("step %d metrics differ: %+v vs %+v", i, m1[i], m2[i])
		}
	}
}

// TestOptimizerResume: 3 steps, save weights + optimizer, restore into a fresh runtime (other
// seed), 3 more steps == 6 uninterrupted steps, bit for bit.
func TestOptimizerResume(t *testing.T) {
	var batches []data.TokenBatch
	for i := range 6 {
		batches = append(batches, randomBatch(t, tinyCfg().Vocab, 2, 10, uint64(20+i)))
	}
	opts := Options{Seed: 5, Optimizer: AdamW{WeightDecay: 0.05, ClipNorm: 0.5}}
	full := newRuntime(t, opts)
	trainSteps(t, full, batches, 5e-3)

	a := newRuntime(t, opts)
	trainSteps(t, a, batches[:3], 5e-3)
	var wbuf, obuf bytes.Buffer
	if err := a.SaveWeights(&wbuf, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveOptimizer(&obuf); err != nil {
		t.Fatal(err)
	}
	opts.Seed = 99
	b := newRuntime(t, opts)
	if err := b.LoadWeights(&wbuf); err != nil {
		t.Fatal(err)
	}
	if err := b.LoadOptimizer(&obuf); err != nil {
		t.Fatal(err)
	}
	if s, err := b.OptimizerState(); err != nil || s.Step != 3 {
		t.Fatalf("restored step %d, err %v; want 3", s.Step, err)
	}
	trainSteps(t, b, batches[3:], 5e-3)
	if k := bitsEqual(exportWeights(t, full), exportWeights(t, b)); k != "" {
		t.Fatalf("resumed weights differ from uninterrupted ones at %q", k)
	}
	sf, err := full.OptimizerState()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.OptimizerState()
	if err != nil {
		t.Fatal(err)
	}
	if sf.Step != 6 || sb.Step != 6 {
		t.Fatalf("steps %d and %d, want 6", sf.Step, sb.Step)
	}
	if k := bitsEqual(sf.M, sb.M); k != "" {
		t.Fatalf("first moments differ at %q", k)
	}
	if k := bitsEqual(sf.V, sb.V); k != "" {
		t.Fatalf("second moments differ at %q", k)
	}
}

// TestWeightDecayMask: with every loss weight 0 the gradient is 0, so a step only decays: weights
// shrink by (1 - lr·wd), norm scales do not.
func TestWeightDecayMask(t *testing.T) {
	const lr, wd = 0.1, 0.5
	r := newRuntime(t, Options{Seed: 2, Optimizer: AdamW{WeightDecay: wd}})
	before := exportWeights(t, r)
	b := randomBatch(t, r.Config().Vocab, 2, 8, 1)
	for i := range b.LossMask {
		for j := range b.LossMask[i] {
			b.LossMask[i][j] = 0
		}
	}
	m, err := r.TrainStep(b, lr)
	if err != nil {
		t.Fatal(err)
	}
	if m.Loss != 0 || m.GradNorm != 0 || m.Tokens != 0 {
		t.Fatalf("all-masked step: %+v, want zero loss, grad norm and tokens", m)
	}
	after := exportWeights(t, r)
	for path, w0 := range before {
		factor := float32(1)
		if Decays(path) {
			factor = 1 - lr*wd
		}
		for i := range w0 {
			if want := w0[i] * factor; math.Abs(float64(after[path][i]-want)) > 1e-6*math.Abs(float64(want))+1e-9 {
				t.Fatalf("%s[%d]: %g → %g, want %g (decays=%v)", path, i, w0[i], after[path][i], want, Decays(path))
			}
		}
	}
	for _, p := range []string{"final_norm/scale", "layers/0/attn_norm/scale"} {
		if Decays(p) {
			t.Fatalf("%s must not decay", p)
		}
	}
	for _, p := range []string{model.VarEmbed, "layers/1/mlp/down", "layers/0/attn/qkv"} {
		if !Decays(p) {
			t.Fatalf("%s must decay", p)
		}
	}
}

// TestClipping: after one step m = (1-β1)·g_clipped, so |m| = 0.1·min(|g|, clip).
func TestClipping(t *testing.T) {
	b := randomBatch(t, tinyCfg().Vocab, 2, 8, 4)
	for _, tc := range []struct {
		name string
		clip float64
	}{{"clipped", 1e-3}, {"unclipped", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRuntime(t, Options{Seed: 3, Optimizer: AdamW{ClipNorm: tc.clip}})
			m, err := r.TrainStep(b, 1e-3)
			if err != nil {
				t.Fatal(err)
			}
			s, err := r.OptimizerState()
			if err != nil {
				t.Fatal(err)
			}
			var sq float64
			for _, v := range s.M {
				for _, x := range v {
					sq += float64(x) * float64(x)
				}
			}
			want := 0.1 * float64(m.GradNorm)
			if tc.clip > 0 {
				want = 0.1 * math.Min(float64(m.GradNorm), tc.clip)
			}
			if got := math.Sqrt(sq); math.Abs(got-want) > 1e-3*want {
				t.Fatalf("|m| = %g, want %g (grad norm %g)", got, want, m.GradNorm)
			}
		})
	}
}

// TestGradientMatchesFiniteDifference checks the train graph's gradient (read back as m/(1-β1)
// after one unclipped step) against central differences of EvalLoss.
func TestGradientMatchesFiniteDifference(t *testing.T) {
	r := newRuntime(t, Options{Seed: 4, InitStd: 0.3, Optimizer: AdamW{ClipNorm: -1}})
	b := randomBatch(t, r.Config().Vocab, 2, 6, 5)
	w0 := exportWeights(t, r)
	if _, err := r.TrainStep(b, 0); err != nil {
		t.Fatal(err)
	}
	s, err := r.OptimizerState()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{model.VarEmbed, "layers/0/attn/qkv", "layers/1/mlp/down", "final_norm/scale"} {
		// The largest gradient component of the variable.
		best := 0
		for i, x := range s.M[path] {
			if math.Abs(float64(x)) > math.Abs(float64(s.M[path][best])) {
				best = i
			}
		}
		grad := float64(s.M[path][best]) / 0.1
		const h = 1e-2
		loss := func(delta float32) float64 {
			w := map[string][]float32{}
			for k, v := range w0 {
				w[k] = append([]float32(nil), v...)
			}
			w[path][best] += delta
			if err := r.ImportWeights(w); err != nil {
				t.Fatal(err)
			}
			m, err := r.EvalLoss(b)
			if err != nil {
				t.Fatal(err)
			}
			return float64(m.Loss)
		}
		fd := (loss(h) - loss(-h)) / (2 * h)
		if math.Abs(fd-grad) > 0.02*math.Abs(grad)+1e-4 {
			t.Errorf("%s[%d]: gradient %g, finite difference %g", path, best, grad, fd)
		}
	}
}

// TestNonFiniteStepChangesNothing: a NaN weight makes the loss NaN; the step must leave weights,
// moments and the step count alone and report the NaN.
func TestNonFiniteStepChangesNothing(t *testing.T) {
	r := newRuntime(t, Options{Seed: 6})
	w := exportWeights(t, r)
	w[model.VarEmbed][0] = float32(math.NaN())
	if err := r.ImportWeights(w); err != nil {
		t.Fatal(err)
	}
	b := randomBatch(t, r.Config().Vocab, 2, 8, 6)
	b.Tokens[0][0] = 0 // the NaN row is looked up
	m, err := r.TrainStep(b, 1e-2)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(m.Loss)) && !math.IsNaN(float64(m.GradNorm)) {
		t.Fatalf("metrics %+v: want a NaN loss or grad norm", m)
	}
	after := exportWeights(t, r)
	w[model.VarEmbed][0] = 0
	after[model.VarEmbed][0] = 0
	if k := bitsEqual(w, after); k != "" {
		t.Fatalf("weights changed at %q after a non-finite step", k)
	}
	s, err := r.OptimizerState()
	if err != nil {
		t.Fatal(err)
	}
	if s.Step != 0 {
		t.Fatalf("step %d after a skipped step, want 0", s.Step)
	}
}

func TestTrainStepRejects(t *testing.T) {
	r := newRuntime(t, Options{Buckets: Buckets{Batch: []int{2, 4}}})
	good := randomBatch(t, r.Config().Vocab, 2, 8, 1)
	ragged := randomBatch(t, r.Config().Vocab, 2, 8, 1)
	ragged.Tokens[1] = ragged.Tokens[1][:5]
	oov := randomBatch(t, r.Config().Vocab, 2, 8, 1)
	oov.Targets[1][3] = 999
	noTargets := randomBatch(t, r.Config().Vocab, 2, 8, 1)
	noTargets.Targets = nil
	badMask := randomBatch(t, r.Config().Vocab, 2, 8, 1)
	badMask.LossMask = badMask.LossMask[:1]
	for _, tc := range []struct {
		name string
		b    data.TokenBatch
		lr   float32
		want string
	}{
		{"empty", data.TokenBatch{}, 1e-3, "empty batch"},
		{"ragged", ragged, 1e-3, "tokens row 1 has 5 entries, want 8"},
		{"out of vocab", oov, 1e-3, "target 999 at [1,3] outside vocab 37"},
		{"no targets", noTargets, 1e-3, "no targets"},
		{"mask rows", badMask, 1e-3, "loss_mask has 1 rows"},
		{"too long", randomBatch(t, r.Config().Vocab, 1, 65, 1), 1e-3, "exceeds max_seq 64"},
		{"bucket", randomBatch(t, r.Config().Vocab, 5, 8, 1), 1e-3, "batch 5 exceeds the largest bucket 4"},
		{"nan lr", good, float32(math.NaN()), "lr=NaN"},
		{"negative lr", good, -1, "lr=-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.TrainStep(tc.b, tc.lr)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "tpu: train step: ") {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
			if tc.name == "too long" && !errors.Is(err, model.ErrTooLong) {
				t.Fatalf("err %v: want model.ErrTooLong (callers stop retrying it)", err)
			}
		})
	}
	if _, err := r.TrainStep(good, 1e-3); err != nil {
		t.Fatalf("valid batch after rejected ones: %v", err)
	}
}
