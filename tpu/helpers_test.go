package tpu

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
)

// tinyCfg is a small llama-style model that compiles and trains in well under a second.
func tinyCfg() model.Config {
	return model.Config{Family: modelcfg.FamilyLlama, Vocab: 37, DModel: 32, Layers: 2, Heads: 4, KVHeads: 2,
		HeadDim: 8, FFN: 48, MaxSeq: 64, RopeTheta: 10000, NormEps: 1e-5, Activation: modelcfg.ActSiLU,
		TiedEmbeddings: true}
}

func newRuntime(t testing.TB, opts Options) *Runtime {
	t.Helper()
	if opts.Model.Family == "" {
		opts.Model = tinyCfg()
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// randomBatch is an LMBatch of n random sequences of length seq+1 (targets shifted).
func randomBatch(t testing.TB, vocab, n, seq int, seed uint64) data.TokenBatch {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	seqs := make([][]int, n)
	for i := range seqs {
		seqs[i] = make([]int, seq+1)
		for j := range seqs[i] {
			seqs[i][j] = rng.IntN(vocab)
		}
	}
	b, err := LMBatch(seqs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exportWeights(t testing.TB, r *Runtime) map[string][]float32 {
	t.Helper()
	w, err := r.ExportWeights()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// bitsEqual reports the first variable whose values differ bit for bit ("" if none).
func bitsEqual(a, b map[string][]float32) string {
	if len(a) != len(b) {
		return "<variable count>"
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || len(va) != len(vb) {
			return k
		}
		for i := range va {
			if math.Float32bits(va[i]) != math.Float32bits(vb[i]) {
				return k
			}
		}
	}
	return ""
}

func trainSteps(t testing.TB, r *Runtime, batches []data.TokenBatch, lr float32) []StepMetrics {
	t.Helper()
	var out []StepMetrics
	for i, b := range batches {
		m, err := r.TrainStep(b, lr)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		out = append(out, m)
	}
	return out
}

// loadDir builds a runtime holding the Hugging Face model directory dir (config.json and the
// weights, one file or shards), as activities/train's Load does with a tpu engine.
func loadDir(dir string, opts Options) (*Runtime, error) {
	src := DirSource(dir)
	m, err := hf.Inspect(src)
	if err != nil {
		return nil, err
	}
	opts.Model = m.Config
	r, err := New(opts)
	if err != nil {
		return nil, err
	}
	rc, err := m.OpenWeights(src)
	if err != nil {
		r.Close()
		return nil, err
	}
	defer rc.Close()
	if err := r.LoadWeights(rc); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// sameArchitecture compares what decides the weights' shapes and the graph's math.
func sameArchitecture(a, b model.Config) bool {
	a.MaxSeq, b.MaxSeq = 0, 0 // only a limit on inputs
	if len(a.LayerTypes) == 0 && len(b.LayerTypes) == 0 {
		a.LayerTypes, b.LayerTypes = nil, nil // nil and empty mean the same
	}
	return reflect.DeepEqual(a, b) // follows RopeScaling's pointer and compares LayerTypes
}

// familyCfgs are tinyCfg with each family's features: gemma's (1+w) norms, GELU and scaled
// embeddings; qwen2's biases and untied head; a value head.
func familyCfgs() (gemma, qwen, critic model.Config) {
	gemma, qwen, critic = tinyCfg(), tinyCfg(), tinyCfg()
	gemma.Family, gemma.Activation, gemma.ScaleEmbeddings, gemma.NormPlusOne = modelcfg.FamilyGemma, modelcfg.ActGELU, true, true
	qwen.Family, qwen.QKVBias, qwen.TiedEmbeddings = modelcfg.FamilyQwen2, true, false
	critic.ValueHead = true
	return gemma, qwen, critic
}

// sameLogits fails t unless runtimes a (saved) and b (loaded) give logits within tol of each other
// on batch.
func sameLogits(t *testing.T, a, b *Runtime, batch data.TokenBatch, tol float32) {
	t.Helper()
	la, err := a.Logits(batch)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Logits(batch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range la.Data {
		if d := float32(math.Abs(float64(la.Data[i] - lb.Data[i]))); d > tol {
			t.Fatalf("logit %d: %v saved vs %v loaded", i, la.Data[i], lb.Data[i])
		}
	}
}
