package lm_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/lm"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers/traintest"
)

func loraBatch(vocab, rows, seq int, seed uint64) data.TokenBatch {
	rng := rand.New(rand.NewPCG(seed, 5))
	var b data.TokenBatch
	for range rows {
		tok, tgt, pos := make([]int, seq), make([]int, seq), make([]int, seq)
		mask, valid := make([]float32, seq), make([]bool, seq)
		for i := range seq {
			tok[i], tgt[i], pos[i], mask[i], valid[i] = rng.IntN(vocab), rng.IntN(vocab), i, 1, true
		}
		b.Tokens, b.Targets, b.Positions = append(b.Tokens, tok), append(b.Targets, tgt), append(b.Positions, pos)
		b.LossMask, b.Valid = append(b.LossMask, mask), append(b.Valid, valid)
	}
	return b
}

func loraLogProbs(t *testing.T, e train.Engine, b data.TokenBatch) []float32 {
	t.Helper()
	lp, err := e.LogProbs(b)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Concat(lp...)
}

func loraMaxDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// TestLoRACheckpoints: a LoRA phase's chunk starts from a plain checkpoint (the base), commits the
// adapters alone with the base referenced by URI, resumes from that commit bit-identically, loads
// as base + adapters, and merges into a plain model with the same log-probs (1e-5).
func TestLoRACheckpoints(t *testing.T) {
	ctx := context.Background()
	cl := ckpt.New(ckpt.Options{})
	store := "file://" + t.TempDir()
	cfg := model.Config{Family: modelcfg.FamilyLlama, Vocab: 40, DModel: 32, Layers: 2, Heads: 4, KVHeads: 2,
		HeadDim: 8, FFN: 48, MaxSeq: 64, RopeTheta: 10000, NormEps: 1e-5, Activation: modelcfg.ActSiLU, TiedEmbeddings: true}
	a := &lm.Activities{Activities: &train.Activities{Ckpt: cl, NewEngine: traintest.NewEngine}}
	init, err := a.Init(ctx, trainapi.InitInput{Store: store, Run: "r", Phase: "pretrain", Model: modelcfg.Config(cfg), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	base := init.Checkpoint
	optim := trainapi.Optim{LR: 1e-2, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}
	lora := &model.LoRA{Rank: 4, Alpha: 8, Dropout: 0.1, Seed: 3, Targets: []string{"attn.*", "down_proj"}}
	var batches []data.TokenBatch
	for i := range 6 {
		batches = append(batches, loraBatch(cfg.Vocab, 3, 10, uint64(i)))
	}
	steps := func(e train.Engine, bs []data.TokenBatch) {
		t.Helper()
		for _, b := range bs {
			if _, err := e.TrainStep(b, 1e-2); err != nil {
				t.Fatal(err)
			}
		}
	}
	probe := loraBatch(cfg.Vocab, 2, 9, 99)

	loader := train.Loader{Ckpt: cl, NewEngine: traintest.NewEngine}
	fullM, err := loader.Load(ctx, base, train.LoadOptions{Optim: optim, LoRA: lora})
	if err != nil {
		t.Fatal(err)
	}
	full, ad := fullM.Engine, fullM.Adapters
	defer full.Close()
	if ad == nil || ad.Base != base {
		t.Fatalf("adapters %+v, want base %s", ad, base)
	}
	plainBaseM, err := loader.Load(ctx, base, train.LoadOptions{Optim: optim})
	if err != nil {
		t.Fatal(err)
	}
	plainBase := plainBaseM.Engine
	defer plainBase.Close()
	baseLP := loraLogProbs(t, plainBase, probe)
	if !slices.Equal(loraLogProbs(t, full, probe), baseLP) {
		t.Fatal("fresh adapters changed the base model's log-probs")
	}
	steps(full, batches[:3])
	ref, err := cl.Save(ctx, store, "r", "sft", 3, func(w *ckpt.Writer) error {
		return train.WriteModel(ctx, w, fullM, ckpt.State{Step: 3}, true)
	})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := cl.Read(ctx, ref.URI)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range ck.Manifest.Files {
		names = append(names, f.Name)
	}
	if want := []string{hf.AdapterConfigFile, hf.AdapterWeightsFile, trainapi.OptimizerFile, "state.json"}; !slices.Equal(names, want) {
		t.Fatalf("LoRA checkpoint files %q, want %q (the base is referenced, not copied)", names, want)
	}
	atStep3 := loraLogProbs(t, full, probe)
	if loraMaxDiff(atStep3, baseLP) < 1e-4 {
		t.Fatal("three adapter steps did not change the model")
	}

	// Without LoRA options, evaluation, rollouts and policies read the checkpoint as one plain
	// (merged) model equal to base + adapters.
	evM, err := loader.Load(ctx, ck.Ref.URI, train.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, evCfg := evM.Engine, evM.Config
	defer ev.Close()
	if _, isAdapter := ev.(interface{ LoRA() (model.LoRA, bool) }).LoRA(); isAdapter || !reflect.DeepEqual(evCfg, cfg) || !evM.Merged {
		t.Fatalf("Load of adapters: adapters attached %v, merged %v, config %+v", isAdapter, evM.Merged, evCfg)
	}
	if d := loraMaxDiff(loraLogProbs(t, ev, probe), atStep3); d > 1e-5 {
		t.Fatalf("merged checkpoint differs from the trained base + adapters by %.2e", d)
	}

	// Resume: a retried or next chunk from the adapter checkpoint continues bit-identically.
	resumedM, err := loader.Load(ctx, ref.URI, train.LoadOptions{Optim: optim, LoRA: lora, Optimizer: true})
	if err != nil {
		t.Fatal(err)
	}
	resumed, ad2 := resumedM.Engine, resumedM.Adapters
	if !resumedM.OptimizerLoaded {
		t.Fatal("resumed adapters without their optimizer state")
	}
	defer resumed.Close()
	if ad2 == nil || ad2.Base != base {
		t.Fatalf("resumed adapters %+v, want base %s", ad2, base)
	}
	steps(full, batches[3:])
	steps(resumed, batches[3:])
	var fa, ra bytes.Buffer
	if err := full.Caps().Adapters.SaveAdapters(&fa); err != nil {
		t.Fatal(err)
	}
	if err := resumed.Caps().Adapters.SaveAdapters(&ra); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fa.Bytes(), ra.Bytes()) {
		t.Fatal("adapters resumed from the checkpoint differ from the uninterrupted run")
	}
	var fb, rb bytes.Buffer
	if err := full.SaveWeights(&fb); err != nil {
		t.Fatal(err)
	}
	if err := plainBase.SaveWeights(&rb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fb.Bytes(), rb.Bytes()) {
		t.Fatal("base weights changed during adapter training")
	}

	// Merge: plain weights equal to base + adapters.
	mergedM, err := loader.Load(ctx, ref.URI, train.LoadOptions{Want: train.WantWeights})
	if err != nil {
		t.Fatal(err)
	}
	mcfg, merged := mergedM.Config, mergedM.Weights
	plain, err := tpu.New(tpu.Options{Model: mcfg})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ImportWeights(merged); err != nil {
		t.Fatal(err)
	}
	plainLP, err := plain.LogProbs(probe)
	if err != nil {
		t.Fatal(err)
	}
	d := loraMaxDiff(slices.Concat(plainLP...), atStep3)
	t.Logf("max |Δ log-prob| merged checkpoint vs base+adapters: %.2e", d)
	if d > 1e-5 {
		t.Fatalf("merged model differs from base + adapters by %.2e", d)
	}
	// A chunk without lora from an adapter checkpoint continues from the merged model.
	mergedEngM, err := loader.Load(ctx, ref.URI, train.LoadOptions{Optim: optim, Optimizer: true})
	if err != nil {
		t.Fatal(err)
	}
	mergedEng, ad3 := mergedEngM.Engine, mergedEngM.Adapters
	if mergedEngM.OptimizerLoaded {
		t.Fatal("the adapters' optimizer state was loaded into the merged model")
	}
	defer mergedEng.Close()
	if ad3 != nil || loraMaxDiff(loraLogProbs(t, mergedEng, probe), atStep3) > 1e-5 {
		t.Fatalf("full training from an adapter checkpoint: adapters %+v (want nil) or log-probs off", ad3)
	}
	// Other adapters than the checkpoint's are refused as bad input.
	_, err = loader.Load(ctx, ref.URI, train.LoadOptions{Optim: optim, LoRA: &model.LoRA{Rank: 8}, Optimizer: true})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != "InvalidInput" {
		t.Fatalf("rank-8 phase on rank-4 adapters: %v", err)
	}
	if m, err := loader.Load(ctx, base, train.LoadOptions{Want: train.WantWeights}); err != nil || m.Merged {
		t.Fatalf("a plain checkpoint loaded as merged adapters (%v)", err)
	}
}
