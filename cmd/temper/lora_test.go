package main

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/tpu"
)

// TestLoRAMergeCommand: `temper lora merge` turns a LoRA checkpoint (adapters + base URI) into a
// plain model directory whose logits equal base + adapters to 1e-5; `temper lora export` writes
// the PEFT adapter directory.
func TestLoRAMergeCommand(t *testing.T) {
	ctx := context.Background()
	cl := ckpt.New(ckpt.Options{})
	store := "file://" + t.TempDir()
	cfg := model.Config{Family: modelcfg.FamilyLlama, Vocab: 40, DModel: 32, Layers: 2, Heads: 4, KVHeads: 2,
		HeadDim: 8, FFN: 48, MaxSeq: 64, RopeTheta: 10000, NormEps: 1e-5, Activation: modelcfg.ActSiLU, TiedEmbeddings: true}
	rt, err := tpu.New(tpu.Options{Model: cfg, Seed: 1, LoRA: &model.LoRA{Rank: 4, Targets: []string{"q_proj", "mlp.*"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cfgJSON, err := cfg.ToHFConfig()
	if err != nil {
		t.Fatal(err)
	}
	baseRef, err := cl.Save(ctx, store, "r", "pretrain", 0, func(w *ckpt.Writer) error {
		if err := w.Add(ctx, trainapi.ConfigFile, strings.NewReader(string(cfgJSON))); err != nil {
			return err
		}
		f, err := w.Create(ctx, trainapi.ModelFile)
		if err != nil {
			return err
		}
		if err := rt.SaveWeights(f, safetensors.F32); err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var batch data.TokenBatch
	seqs := make([][]int, 3)
	for i := range seqs {
		for range 11 {
			seqs[i] = append(seqs[i], rng.IntN(cfg.Vocab))
		}
	}
	if batch, err = tpu.LMBatch(seqs, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := rt.TrainStep(batch, 3e-2); err != nil {
			t.Fatal(err)
		}
	}
	adRef, err := cl.Save(ctx, store, "r", "sft", 3, func(w *ckpt.Writer) error {
		js, err := rt.AdapterConfig(baseRef.URI)
		if err != nil {
			return err
		}
		if err := w.Add(ctx, hf.AdapterConfigFile, strings.NewReader(string(js))); err != nil {
			return err
		}
		f, err := w.Create(ctx, hf.AdapterWeightsFile)
		if err != nil {
			return err
		}
		if err := rt.SaveAdapters(f); err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "merged")
	if out, err := cli(t, "lora", "merge", adRef.URI, dir); err != nil {
		t.Fatalf("lora merge: %v\n%s", err, out)
	}
	mdir, err := hf.Inspect(tpu.DirSource(dir))
	if err != nil {
		t.Fatal(err)
	}
	merged, err := tpu.New(tpu.Options{Model: mdir.Config})
	if err != nil {
		t.Fatal(err)
	}
	defer merged.Close()
	wr, err := mdir.OpenWeights(tpu.DirSource(dir))
	if err != nil {
		t.Fatal(err)
	}
	err = merged.LoadWeights(wr)
	wr.Close()
	if err != nil {
		t.Fatal(err)
	}
	want, err := rt.Logits(batch)
	if err != nil {
		t.Fatal(err)
	}
	got, err := merged.Logits(batch)
	if err != nil {
		t.Fatal(err)
	}
	var d float64
	for i := range want.Data {
		d = math.Max(d, math.Abs(float64(want.Data[i]-got.Data[i])))
	}
	t.Logf("max |Δlogit| merged directory vs base+adapters: %.2e", d)
	if d > 1e-5 {
		t.Fatalf("merged model differs from base + adapters by %.2e", d)
	}

	pdir := filepath.Join(t.TempDir(), "peft")
	if out, err := cli(t, "lora", "export", adRef.URI, pdir); err != nil {
		t.Fatalf("lora export: %v\n%s", err, out)
	}
	js, err := os.ReadFile(filepath.Join(pdir, hf.AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, base, err := model.ParsePEFTConfig(js); err != nil || base != baseRef.URI {
		t.Fatalf("exported adapter config names base %q (%v), want %s", base, err, baseRef.URI)
	}
	// ckpt export writes a Hugging Face directory in the dtype asked for (the merged adapters here).
	edir := filepath.Join(t.TempDir(), "exported")
	if out, err := cli(t, "ckpt", "--dtype", "bf16", "--max-shard-size", "20KB", "export", adRef.URI, edir); err != nil {
		t.Fatalf("ckpt export: %v\n%s", err, out)
	}
	exported, err := hf.Inspect(tpu.DirSource(edir))
	if err != nil {
		t.Fatal(err)
	}
	if exported.Meta.DType != safetensors.BF16 || !exported.Sharded || hf.ConfigDType(exported.Meta.ConfigJSON) != safetensors.BF16 {
		t.Fatalf("ckpt export --dtype bf16: weights %s, sharded %v, config.json %s", exported.Meta.DType, exported.Sharded, exported.Meta.ConfigJSON)
	}
	if out, err := cli(t, "lora", "merge", baseRef.URI, dir); err == nil || !strings.Contains(out+err.Error(), "not a LoRA checkpoint") {
		t.Fatalf("merging a plain checkpoint: %v %s", err, out)
	}
}
