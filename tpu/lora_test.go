package tpu

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

func logits(t testing.TB, r *Runtime, b data.TokenBatch) []float32 {
	t.Helper()
	l, err := r.Logits(b)
	if err != nil {
		t.Fatal(err)
	}
	return l.Data
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// loraOpts trains rank-4 adapters on every linear module, with dropout.
func loraOpts() Options {
	return Options{Seed: 5, LoRA: &model.LoRA{Rank: 4, Alpha: 8, Dropout: 0.1, Seed: 2}}
}

// TestLoRATrainsOnlyAdapters: fresh adapters leave the logits exactly as the base computes them;
// training changes the adapters (B included) and never a base weight; the optimizer state covers
// only the adapters; a second runtime with the same seeds ends bit-identical (seeded dropout).
func TestLoRATrainsOnlyAdapters(t *testing.T) {
	base := newRuntime(t, Options{Seed: 5})
	r := newRuntime(t, loraOpts())
	probe := randomBatch(t, tinyCfg().Vocab, 3, 9, 1)
	if got, want := logits(t, r, probe), logits(t, base, probe); !slices.Equal(got, want) {
		t.Fatalf("fresh adapters changed the logits by %.2e", maxAbsDiff(got, want))
	}
	w0 := exportWeights(t, r)
	a0, err := r.ExportAdapters()
	if err != nil {
		t.Fatal(err)
	}
	var batches []data.TokenBatch
	for i := range 4 {
		batches = append(batches, randomBatch(t, tinyCfg().Vocab, 4, 12, uint64(10+i)))
	}
	ms := trainSteps(t, r, append(append([]data.TokenBatch(nil), batches...), batches...), 2e-2)
	if !(ms[len(ms)-1].Loss < ms[0].Loss) {
		t.Fatalf("adapter training did not lower the loss: %v → %v", ms[0].Loss, ms[len(ms)-1].Loss)
	}
	if k := bitsEqual(w0, exportWeights(t, r)); k != "" {
		t.Fatalf("base weight %q changed while training adapters", k)
	}
	a1, err := r.ExportAdapters()
	if err != nil {
		t.Fatal(err)
	}
	for p, v := range a1 {
		if slices.Equal(v, a0[p]) {
			t.Fatalf("adapter %s did not change", p)
		}
	}
	if got := logits(t, r, probe); maxAbsDiff(got, logits(t, base, probe)) < 1e-3 {
		t.Fatal("trained adapters do not change the logits")
	}
	st, err := r.OptimizerState()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.M) != len(a1) {
		t.Fatalf("optimizer holds %d moments, want one per adapter (%d)", len(st.M), len(a1))
	}
	for p := range st.M {
		if _, ok := a1[p]; !ok {
			t.Fatalf("optimizer moment for non-adapter %q", p)
		}
	}
	// Same seeds, same batches: bit-identical adapters (dropout masks are seeded by the step).
	r2 := newRuntime(t, loraOpts())
	trainSteps(t, r2, append(append([]data.TokenBatch(nil), batches...), batches...), 2e-2)
	a2, err := r2.ExportAdapters()
	if err != nil {
		t.Fatal(err)
	}
	if k := bitsEqual(a1, a2); k != "" {
		t.Fatalf("two identical LoRA runs differ at %q", k)
	}
	// Objectives train the adapters only, too.
	w1 := exportWeights(t, r)
	if _, err := r.StepObjective(ceObjective, ceBatch(batches[0]), 1e-2); err != nil {
		t.Fatal(err)
	}
	if k := bitsEqual(w1, exportWeights(t, r)); k != "" {
		t.Fatalf("StepObjective changed base weight %q", k)
	}
}

// TestLoRAMergeMatches: a merged plain model computes base + adapters to 1e-5, both through
// MergedWeights in a fresh runtime and through MergeLoRA in place; the merged runtime then trains
// as a plain model.
func TestLoRAMergeMatches(t *testing.T) {
	opts := loraOpts()
	opts.LoRA.Targets = []string{"q_proj", "v_proj", "mlp.*"}
	r := newRuntime(t, opts)
	for i := range 4 {
		trainSteps(t, r, []data.TokenBatch{randomBatch(t, tinyCfg().Vocab, 4, 12, uint64(30+i))}, 3e-2)
	}
	probe := randomBatch(t, tinyCfg().Vocab, 3, 9, 1)
	want := logits(t, r, probe)
	base := newRuntime(t, Options{Seed: 5})
	if d := maxAbsDiff(want, logits(t, base, probe)); d < 1e-3 {
		t.Fatalf("adapters moved the logits by %.2e only: the test proves nothing", d)
	}

	merged, err := r.MergedWeights()
	if err != nil {
		t.Fatal(err)
	}
	plain := newRuntime(t, Options{Seed: 77})
	if err := plain.ImportWeights(merged); err != nil {
		t.Fatal(err)
	}
	d1 := maxAbsDiff(want, logits(t, plain, probe))

	if err := r.MergeLoRA(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.LoRA(); ok {
		t.Fatal("still has adapters after MergeLoRA")
	}
	d2 := maxAbsDiff(want, logits(t, r, probe))
	t.Logf("max |Δlogit| merged vs base+adapters: %.2e (fresh runtime), %.2e (in place)", d1, d2)
	if d1 > 1e-5 || d2 > 1e-5 {
		t.Fatalf("merged logits differ from base+adapters by %.2e / %.2e (want <= 1e-5)", d1, d2)
	}
	if k := bitsEqual(merged, exportWeights(t, r)); k != "" {
		t.Fatalf("in-place merge and MergedWeights differ at %q", k)
	}
	// A plain model now: every weight trains.
	w := exportWeights(t, r)
	trainSteps(t, r, []data.TokenBatch{probe}, 1e-2)
	changed := 0
	after := exportWeights(t, r)
	for k := range w {
		if !slices.Equal(w[k], after[k]) {
			changed++
		}
	}
	if changed != len(w) {
		t.Fatalf("after merging, %d of %d weights trained", changed, len(w))
	}
	if st, err := r.OptimizerState(); err != nil || len(st.M) != len(w) {
		t.Fatalf("optimizer after merge: %d moments, err %v; want %d", len(st.M), err, len(w))
	}

	// hf.WriteDir writes a directory that loads as the same model.
	dir := t.TempDir()
	if err := hf.WriteDir(DirSink(dir), tinyCfg(), merged, hf.Meta{}, hf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	fromDir, err := loadDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fromDir.Close()
	if d := maxAbsDiff(want, logits(t, fromDir, probe)); d > 1e-5 {
		t.Fatalf("model dir logits differ by %.2e", d)
	}
}

// TestLoRAAdaptersRoundTrip: PEFT-named adapter files (alone, without the base) plus the base
// weights rebuild the same model, and with the optimizer state training resumes bit-identically.
func TestLoRAAdaptersRoundTrip(t *testing.T) {
	var batches []data.TokenBatch
	for i := range 5 {
		batches = append(batches, randomBatch(t, tinyCfg().Vocab, 2, 10, uint64(40+i)))
	}
	full := newRuntime(t, loraOpts())
	trainSteps(t, full, batches, 1e-2)

	a := newRuntime(t, loraOpts())
	trainSteps(t, a, batches[:2], 1e-2)
	var base, ad, opt bytes.Buffer
	if err := a.SaveWeights(&base, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveAdapters(&ad); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveOptimizer(&opt); err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.ReadHeader(bytes.NewReader(ad.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyCfg()
	for name, shape := range map[string][]int{
		"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": {4, cfg.DModel},
		"base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight": {cfg.KVHeads * cfg.HeadDim, 4},
		"base_model.model.model.layers.1.mlp.down_proj.lora_A.weight":    {4, cfg.FFN},
	} {
		e, ok := h.Entry(name)
		if !ok || !slices.Equal(e.Shape, shape) {
			t.Fatalf("adapter file: %s: present %v shape %v, want %v", name, ok, e.Shape, shape)
		}
	}
	if n := len(h.Entries); n != 2*7*cfg.Layers {
		t.Fatalf("adapter file holds %d tensors, want %d (adapters only, no base weights)", n, 2*7*cfg.Layers)
	}

	b := newRuntime(t, Options{Seed: 99, LoRA: &model.LoRA{Rank: 4, Alpha: 8, Dropout: 0.1, Seed: 2}})
	if err := b.LoadWeights(&base); err != nil {
		t.Fatal(err)
	}
	if err := b.LoadAdapters(bytes.NewReader(ad.Bytes())); err != nil {
		t.Fatal(err)
	}
	probe := randomBatch(t, cfg.Vocab, 2, 7, 3)
	if !slices.Equal(logits(t, a, probe), logits(t, b, probe)) {
		t.Fatal("base + loaded adapters differ from the saved model")
	}
	if err := b.LoadOptimizer(&opt); err != nil {
		t.Fatal(err)
	}
	trainSteps(t, b, batches[2:], 1e-2)
	wa, err := full.ExportAdapters()
	if err != nil {
		t.Fatal(err)
	}
	wb, err := b.ExportAdapters()
	if err != nil {
		t.Fatal(err)
	}
	if k := bitsEqual(wa, wb); k != "" {
		t.Fatalf("resumed adapters differ from uninterrupted ones at %q", k)
	}

	// A PEFT directory: adapter_config.json names the base, adapter_model.safetensors holds the rest.
	dir := t.TempDir()
	if err := b.SaveAdapterDir(dir, "file:///store/runs/r/pretrain/step-000010/"); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(dir, hf.AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	l, baseURI, err := model.ParsePEFTConfig(js)
	if err != nil || baseURI != "file:///store/runs/r/pretrain/step-000010/" || l.Rank != 4 || l.Alpha != 8 {
		t.Fatalf("adapter config %s: %+v %q %v", js, l, baseURI, err)
	}
	if _, err := os.Stat(filepath.Join(dir, hf.WeightsFile)); !os.IsNotExist(err) {
		t.Fatalf("adapter dir holds base weights (%v)", err)
	}

	// Mismatched adapters are refused with the tensor named.
	c := newRuntime(t, Options{Seed: 1, LoRA: &model.LoRA{Rank: 2}})
	if err := c.LoadAdapters(bytes.NewReader(ad.Bytes())); err == nil || !strings.Contains(err.Error(), "lora_A.weight") {
		t.Fatalf("rank-2 runtime loading rank-4 adapters: %v", err)
	}
	plain := newRuntime(t, Options{Seed: 1})
	if err := plain.LoadAdapters(bytes.NewReader(ad.Bytes())); err == nil {
		t.Fatal("runtime without LoRA loaded adapters")
	}
	if _, err := New(Options{Model: tinyCfg(), LoRA: &model.LoRA{Targets: []string{"qproj"}}}); err == nil ||
		!strings.Contains(err.Error(), "targets[0]") {
		t.Fatalf("bad target: %v", err)
	}
}
