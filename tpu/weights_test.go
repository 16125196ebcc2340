package tpu

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/sample"
)

// TestWeightsRoundTrip: save → load into a runtime with other weights → identical logits, for
// each family's features (fused/tied/biased/value head).
func TestWeightsRoundTrip(t *testing.T) {
	gemma, qwen, critic := familyCfgs()
	for _, tc := range []struct {
		name  string
		cfg   model.Config
		dtype safetensors.DType
		tol   float32
	}{
		{"llama f32", tinyCfg(), safetensors.F32, 0},
		{"gemma f32", gemma, "", 0},
		{"qwen2 untied f32", qwen, safetensors.F32, 0},
		{"value head f32", critic, safetensors.F32, 0},
		{"llama bf16", tinyCfg(), safetensors.BF16, 0.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newRuntime(t, Options{Model: tc.cfg, Seed: 1, InitStd: 0.1})
			b := newRuntime(t, Options{Model: tc.cfg, Seed: 2, InitStd: 0.1})
			var buf bytes.Buffer
			if err := a.SaveWeights(&buf, tc.dtype); err != nil {
				t.Fatal(err)
			}
			f, err := safetensors.Read(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			shapes, _ := tc.cfg.HFShapes()
			if len(f.Tensors) != len(shapes) || f.Metadata["format"] != "pt" {
				t.Fatalf("%d tensors (metadata %v), want %d HF tensors", len(f.Tensors), f.Metadata, len(shapes))
			}
			for _, ten := range f.Tensors {
				if !slices.Equal(ten.Shape, shapes[ten.Name]) {
					t.Fatalf("%s: shape %v, want %v", ten.Name, ten.Shape, shapes[ten.Name])
				}
			}
			if _, ok := f.Tensor("model.layers.1.self_attn.k_proj.weight"); !ok {
				t.Fatal("no model.layers.1.self_attn.k_proj.weight in the file")
			}
			if err := b.LoadWeights(&buf); err != nil {
				t.Fatal(err)
			}
			sameLogits(t, a, b, randomBatch(t, tc.cfg.Vocab, 2, 9, 3), tc.tol)
		})
	}
}

func TestLoadWeightsRejects(t *testing.T) {
	r := newRuntime(t, Options{})
	var good bytes.Buffer
	if err := r.SaveWeights(&good, ""); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Read(bytes.NewReader(good.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(edit func([]safetensors.Tensor) []safetensors.Tensor) *bytes.Buffer {
		var b bytes.Buffer
		ts := edit(slices.Clone(f.Tensors))
		if err := safetensors.Write(&b, ts, nil); err != nil {
			t.Fatal(err)
		}
		return &b
	}
	for _, tc := range []struct {
		name string
		in   *bytes.Buffer
		want string
	}{
		{"garbage", bytes.NewBufferString("not a safetensors file"), "tpu: load weights: hf: weights: safetensors: read header"},
		{"missing", rewrite(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return slices.DeleteFunc(ts, func(x safetensors.Tensor) bool { return x.Name == "model.norm.weight" })
		}), `tensor "model.norm.weight" of this llama model is missing`},
		{"extra", rewrite(func(ts []safetensors.Tensor) []safetensors.Tensor {
			x, _ := safetensors.FromFloat32("model.extra.weight", []int{1}, []float32{1}, safetensors.F32)
			return append(ts, x)
		}), `weights: tensor "model.extra.weight" is not part of this llama model`},
		{"transposed", rewrite(func(ts []safetensors.Tensor) []safetensors.Tensor {
			for i, x := range ts {
				if x.Name == "model.layers.0.mlp.down_proj.weight" {
					ts[i].Shape = []int{x.Shape[1], x.Shape[0]}
				}
			}
			return ts
		}), `weights: tensor "model.layers.0.mlp.down_proj.weight" has shape [48 32], config.json implies [32 48]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.LoadWeights(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestGenerate: the cached path matches the uncached reference (greedy), generation is counted
// per bucket, follows training, and reports tokens and FLOPs.
func TestGenerate(t *testing.T) {
	r := newRuntime(t, Options{Seed: 1, InitStd: 0.3})
	prompts := [][]int{{1, 2, 3}, {4, 5, 6, 7, 8, 9, 10, 11, 12}, {13}}
	opts := sample.Options{MaxNewTokens: 6}
	cached, err := r.Generate(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.GenerateUncached(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range prompts {
		if !slices.Equal(cached[i].Tokens, ref[i].Tokens) || len(cached[i].Tokens) != 6 {
			t.Fatalf("prompt %d: cached %v vs uncached %v", i, cached[i].Tokens, ref[i].Tokens)
		}
	}
	second := [][]int{{3}, {4, 4}, {5, 5, 5, 5, 5, 5, 5, 5, 5, 5}}
	if _, err := r.Generate(second, opts); err != nil { // same bucket 4x16x32
		t.Fatal(err)
	}
	c := r.Stats().Cache
	if c.Misses != 2 || c.Hits != 1 {
		t.Fatalf("cache %+v, want misses generate[4x16x32] + generate_uncached[4x32], then one hit", c)
	}
	g := r.Stats().Generate
	wantFLOPs := 0.0
	for _, p := range append(append([][]int(nil), prompts...), prompts...) {
		wantFLOPs += GenerateFLOPs(r.Config(), len(p), 6)
	}
	for _, p := range second {
		wantFLOPs += GenerateFLOPs(r.Config(), len(p), 6)
	}
	if g.Calls != 3 || g.Tokens != 9*6 || math.Abs(g.FLOPs-wantFLOPs) > 1e-6*wantFLOPs {
		t.Fatalf("generate stats %+v, want 3 calls, 54 tokens, %g FLOPs", g, wantFLOPs)
	}
	// Training changes what is generated: train hard towards token 7 everywhere.
	b := randomBatch(t, r.Config().Vocab, 4, 8, 2)
	for i := range b.Targets {
		for j := range b.Targets[i] {
			b.Targets[i][j] = 7
		}
	}
	for range 40 {
		if _, err := r.TrainStep(b, 3e-2); err != nil {
			t.Fatal(err)
		}
	}
	after, err := r.Generate(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	if after[0].Tokens[0] != 7 {
		t.Fatalf("after training towards 7, generated %v", after[0].Tokens)
	}
	if _, err := r.Generate([][]int{{1}, {}}, opts); err == nil || !strings.Contains(err.Error(), "prompt 1 is empty") {
		t.Fatalf("empty prompt: err %v", err)
	}
	if _, err := r.Generate([][]int{{1, 99}}, opts); err == nil || !strings.Contains(err.Error(), "token 99 outside vocab") {
		t.Fatalf("out-of-vocab prompt: err %v", err)
	}
}

func TestLMBatch(t *testing.T) {
	b, err := LMBatch([][]int{{1, 2, 3, 4}, {5, 6}}, []int{2, 0})
	if err != nil {
		t.Fatal(err)
	}
	want := data.TokenBatch{
		Tokens:    [][]int{{1, 2, 3}, {5, 0, 0}},
		Targets:   [][]int{{2, 3, 4}, {6, 0, 0}},
		LossMask:  [][]float32{{0, 1, 1}, {1, 0, 0}},
		Positions: [][]int{{0, 1, 2}, {0, 0, 0}},
		Valid:     [][]bool{{true, true, true}, {true, false, false}},
	}
	for i := range 2 {
		if !slices.Equal(b.Tokens[i], want.Tokens[i]) || !slices.Equal(b.Targets[i], want.Targets[i]) ||
			!slices.Equal(b.LossMask[i], want.LossMask[i]) || !slices.Equal(b.Positions[i], want.Positions[i]) ||
			!slices.Equal(b.Valid[i], want.Valid[i]) {
			t.Fatalf("row %d: got %+v, want %+v", i, b, want)
		}
	}
	for _, tc := range []struct {
		seqs    [][]int
		prompts []int
		want    string
	}{
		{nil, nil, "no sequences"},
		{[][]int{{1}}, nil, "sequence 0 has 1 tokens"},
		{[][]int{{1, 2}}, []int{1, 1}, "2 prompt lengths for 1 sequences"},
	} {
		if _, err := LMBatch(tc.seqs, tc.prompts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LMBatch(%v, %v): err %v, want %q", tc.seqs, tc.prompts, err, tc.want)
		}
	}
}
