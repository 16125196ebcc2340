package model

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/testbackend"
)

// familyGolden is golden.json of one directory made by scripts/goldens/families/make_goldens.py.
type familyGolden struct {
	Name      string        `json:"name"`
	ModelType string        `json:"model_type"`
	Sequences [][]int       `json:"sequences"`
	Logits    [][][]float64 `json:"logits"` // [sequence][position][vocab]
	Prompt    []int         `json:"prompt"`
	Greedy    []int         `json:"greedy"`
}

// familyDir is one reference checkpoint loaded the way a user's Hugging Face directory is.
type familyDir struct {
	dir     string
	cfg     Config
	weights map[string][]float32 // internal paths
	file    []byte               // model.safetensors as written by the reference
	golden  familyGolden
}

func loadFamilyDirs(t *testing.T) []familyDir {
	t.Helper()
	paths, err := filepath.Glob("testdata/families/*/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 16 {
		t.Fatalf("found %d reference directories, want 16 (8 families × 2 config forms): run scripts/goldens/families/make_goldens.py", len(paths))
	}
	var out []familyDir
	for _, p := range paths {
		dir := filepath.Dir(p)
		var fd familyDir
		fd.dir = dir
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &fd.golden); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cfgJSON, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if fd.cfg, err = FromHFConfig(cfgJSON); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if fd.file, err = os.ReadFile(filepath.Join(dir, "model.safetensors")); err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Read(bytes.NewReader(fd.file))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		hf := map[string][]float32{}
		for _, ts := range f.Tensors {
			if hf[ts.Name], err = ts.ToFloat32(); err != nil {
				t.Fatal(err)
			}
		}
		if fd.weights, err = fd.cfg.FromHF(hf); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out = append(out, fd)
	}
	return out
}

// fullLogitsDiff runs Forward on the golden sequences, left-padded into one batch, and returns the
// largest |Δ| against the reference over every real position.
func fullLogitsDiff(t *testing.T, cfg Config, w map[string][]float32, g familyGolden) float64 {
	t.Helper()
	longest := 0
	for _, s := range g.Sequences {
		longest = max(longest, len(s))
	}
	tok, pos, mask := leftPadded(g.Sequences, longest)
	got := runForward(t, cfg, newStore(t, cfg, w), tok, pos, mask)
	var worst float64
	for b, s := range g.Sequences {
		pad := longest - len(s)
		for p := range s {
			row := got[(b*longest+pad+p)*cfg.Vocab : (b*longest+pad+p+1)*cfg.Vocab]
			worst = math.Max(worst, maxAbsDiff(row, g.Logits[b][p]))
		}
	}
	return worst
}

func maxAbsDiff(got []float32, want []float64) float64 {
	var worst float64
	for i, w := range want {
		worst = math.Max(worst, math.Abs(float64(got[i])-w))
	}
	if len(got) != len(want) {
		return math.Inf(1)
	}
	return worst
}

// cachedLogitsDiff runs the Generator's prefill on the first promptLen tokens of each sequence
// (left-padded, prompts of different lengths) and then feeds the rest of each sequence one decode
// step at a time through the KV cache (teacher forcing), comparing the logits of every position
// from the prompt's last one on with the reference.
func cachedLogitsDiff(t *testing.T, cfg Config, w map[string][]float32, g familyGolden, promptLen int) float64 {
	t.Helper()
	gen, err := NewGenerator(testbackend.Sequential(), newStore(t, cfg, w).RootScope(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cachedWith(t, gen, cfg, g, promptLen)
}

// cachedWith is cachedLogitsDiff with a given Generator.
func cachedWith(t *testing.T, gen *Generator, cfg Config, g familyGolden, promptLen int) float64 {
	t.Helper()
	seqs := g.Sequences
	b := len(seqs)
	pl := make([]int, b)
	P, steps := 0, 0
	for i, s := range seqs {
		pl[i] = min(promptLen, len(s))
		P = max(P, pl[i])
	}
	for i, s := range seqs {
		steps = max(steps, len(s)-pl[i])
	}
	S := roundUp(P+steps+1, cacheStep)
	tok, pos := make([]int32, b*P), make([]int32, b*P)
	starts := make([]int, b)
	for i, s := range seqs {
		starts[i] = P - pl[i]
		for j := range pl[i] {
			tok[i*P+starts[i]+j], pos[i*P+starts[i]+j] = int32(s[j]), int32(j)
		}
	}
	cacheMask := func(last int) *tensors.Tensor {
		m := make([]bool, b*S)
		for i := range b {
			for c := starts[i]; c <= last; c++ {
				m[i*S+c] = true
			}
		}
		return tensors.FromFlatDataAndDimensions(m, b, S)
	}
	var worst float64
	seen := 0
	record := func(logits *tensors.Tensor, posOf func(i int) int) {
		data := tensors.MustCopyFlatData[float32](logits)
		for i := range b {
			if p := posOf(i); p >= 0 && p < len(seqs[i]) {
				worst = math.Max(worst, maxAbsDiff(data[i*cfg.Vocab:(i+1)*cfg.Vocab], g.Logits[i][p]))
				seen++
			}
		}
	}
	outs, err := gen.prefill.Call(tensors.FromFlatDataAndDimensions(tok, b, P), tensors.FromFlatDataAndDimensions(pos, b, P), cacheMask(P-1))
	if err != nil {
		t.Fatal(err)
	}
	record(outs[0], func(i int) int { return pl[i] - 1 })
	for k := range steps {
		t1, p1 := make([]int32, b), make([]int32, b)
		for i, s := range seqs {
			if q := pl[i] + k; q < len(s) {
				t1[i], p1[i] = int32(s[q]), int32(q)
			}
		}
		cache, err := donateAll(outs[1:], gen.backend)
		if err != nil {
			t.Fatal(err)
		}
		args := append([]any{tensors.FromFlatDataAndDimensions(t1, b, 1), tensors.FromFlatDataAndDimensions(p1, b, 1),
			tensors.FromScalar(int32(P + k)), cacheMask(P + k)}, cache...)
		outs[0].FinalizeAll()
		if outs, err = gen.decode.Call(args...); err != nil {
			t.Fatal(err)
		}
		record(outs[0], func(i int) int { return pl[i] + k })
	}
	for _, o := range outs {
		o.FinalizeAll()
	}
	want := 0
	for i, s := range seqs {
		want += len(s) - pl[i] + 1
	}
	if seen != want {
		t.Fatalf("cached path compared %d positions, want %d", seen, want)
	}
	return worst
}

// familyMutations are configs with one feature switched off or changed: each must move the logits
// well past the tolerance, which shows that the goldens exercise the feature (a check that
// passed with the feature broken would prove nothing).
func familyMutations(c Config) map[string]Config {
	out := map[string]Config{}
	mut := func(name string, f func(*Config)) {
		m := c.Clone()
		f(&m)
		out[name] = m
	}
	if c.hasSliding() {
		mut("no sliding window", func(m *Config) { m.SlidingWindow = 1000 })
	}
	if c.AttnSoftcap > 0 {
		mut("no attention soft-cap", func(m *Config) { m.AttnSoftcap = 0 })
	}
	if c.FinalSoftcap > 0 {
		mut("no final soft-cap", func(m *Config) { m.FinalSoftcap = 0 })
	}
	if c.QueryScale > 0 {
		mut("head_dim scale", func(m *Config) { m.QueryScale = 0 })
	}
	if c.RopeScaling != nil {
		mut("no rope scaling", func(m *Config) { m.RopeScaling = nil })
	}
	if c.RopeLocalTheta > 0 {
		mut("global rope on local layers", func(m *Config) { m.RopeLocalTheta = 0 })
	}
	if c.RotaryDim > 0 {
		mut("full rotary", func(m *Config) { m.RotaryDim = 0 })
	}
	if c.NormPlusOne {
		mut("plain norms", func(m *Config) { m.NormPlusOne = false })
	}
	if c.ScaleEmbeddings {
		mut("unscaled embeddings", func(m *Config) { m.ScaleEmbeddings = false })
	}
	return out
}

// TestFamiliesMatchReference checks every reference directory (8 families × both config.json
// forms): Temper's float32 logits match the PyTorch re-implementation of transformers to 1e-4 at
// every position, in the full forward and through the KV cache (a prompt of one token, and one
// longer than the sliding window); greedy generation continues the prompt as the reference does;
// and weights exported from Temper are byte-identical to the model.safetensors they came from.
func TestFamiliesMatchReference(t *testing.T) {
	const tol = 1e-4
	for _, fd := range loadFamilyDirs(t) {
		t.Run(filepath.Base(fd.dir), func(t *testing.T) {
			cfg, g := fd.cfg, fd.golden
			if cfg.Family != g.ModelType {
				t.Fatalf("family %q, golden says %q", cfg.Family, g.ModelType)
			}
			full := fullLogitsDiff(t, cfg, fd.weights, g)
			cached1 := cachedLogitsDiff(t, cfg, fd.weights, g, 1)
			cached8 := cachedLogitsDiff(t, cfg, fd.weights, g, 8)
			t.Logf("max |Δlogit|: full %.2e, cached from 1 token %.2e, cached from 8 tokens %.2e", full, cached1, cached8)
			if full > tol || cached1 > tol || cached8 > tol {
				t.Errorf("max |Δlogit| full %.3g, cached %.3g / %.3g: want <= %g", full, cached1, cached8, tol)
			}

			gen, err := NewGenerator(testbackend.Sequential(), newStore(t, cfg, fd.weights).RootScope(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			out, err := gen.Generate([][]int{g.Prompt}, sample.Options{MaxNewTokens: len(g.Greedy)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out[0].Tokens, g.Greedy) {
				t.Errorf("greedy continuation %v, reference %v", out[0].Tokens, g.Greedy)
			}

			// Export → re-import: the weights written back are the reference's bytes.
			store := newStore(t, cfg, fd.weights)
			back, err := ExportWeights(store.RootScope(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			hf, err := cfg.ToHF(back)
			if err != nil {
				t.Fatal(err)
			}
			shapes, err := cfg.HFShapes()
			if err != nil {
				t.Fatal(err)
			}
			var ts []safetensors.Tensor
			for name, data := range hf {
				tn, err := safetensors.FromFloat32(name, shapes[name], data, safetensors.F32)
				if err != nil {
					t.Fatal(err)
				}
				ts = append(ts, tn)
			}
			var buf bytes.Buffer
			if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), fd.file) {
				t.Errorf("exported model.safetensors (%d bytes) differs from the reference's (%d bytes)", buf.Len(), len(fd.file))
			}
			js, err := cfg.ToHFConfig()
			if err != nil {
				t.Fatal(err)
			}
			again, err := FromHFConfig(js)
			if err != nil || !reflect.DeepEqual(again, cfg) {
				t.Errorf("config.json round trip: %+v (%v), want %+v", again, err, cfg)
			}
		})
	}
}

// TestFamiliesFeaturesMatter breaks one feature at a time and checks that the reference check
// then fails, in the full path and through the KV cache.
func TestFamiliesFeaturesMatter(t *testing.T) {
	for _, fd := range loadFamilyDirs(t) {
		for name, m := range familyMutations(fd.cfg) {
			t.Run(filepath.Base(fd.dir)+"/"+name, func(t *testing.T) {
				full := fullLogitsDiff(t, m, fd.weights, fd.golden)
				cached := cachedLogitsDiff(t, m, fd.weights, fd.golden, 8)
				if full < 1e-3 || cached < 1e-3 {
					t.Errorf("logits moved only %.2e (full) / %.2e (cached) with %s: the goldens do not exercise it", full, cached, name)
				}
			})
		}
	}
}

// TestFamiliesLoRA attaches adapters to every module of each reference model: fresh adapters
// leave the logits bit-identical, trained ones equal the merged weights in both formulations and
// through the KV cache, and the PEFT tensor names are the family's own (Phi-3's fused qkv_proj
// and gate_up_proj).
func TestFamiliesLoRA(t *testing.T) {
	for _, fd := range loadFamilyDirs(t) {
		if !strings.HasSuffix(fd.dir, "-old") {
			continue // one form per family: the graph does not depend on the form
		}
		t.Run(filepath.Base(fd.dir), func(t *testing.T) {
			cfg, g := fd.cfg, fd.golden
			l := LoRA{Rank: 2, Alpha: 3, Seed: 5}
			longest := len(g.Sequences[0])
			tok, pos, mask := leftPadded(g.Sequences, longest)
			store := newStore(t, cfg, fd.weights)
			base := runForward(t, cfg, store, tok, pos, mask)
			if err := AttachLoRA(store.RootScope(), cfg, l); err != nil {
				t.Fatal(err)
			}
			if got := runForward(t, cfg, store, tok, pos, mask); !slices.Equal(got, base) {
				t.Fatal("fresh adapters changed the logits")
			}
			ad := randomAdapters(t, cfg, l, 9, 0.3)
			if err := ImportLoRA(store.RootScope(), cfg, ad); err != nil {
				t.Fatal(err)
			}
			merged, err := MergeLoRA(cfg, l, fd.weights, ad)
			if err != nil {
				t.Fatal(err)
			}
			want := runForward(t, cfg, newStore(t, cfg, merged), tok, pos, mask)
			for _, mode := range []string{loraExplicit, loraMerged} {
				withMode(t, mode)
				if d := maxAbs(runForward(t, cfg, store, tok, pos, mask), want); d > 1e-4 {
					t.Errorf("%s adapters vs merged weights: max |Δ| %.2e", mode, d)
				}
			}
			withMode(t, loraAuto)
			if d := maxAbs(base, want); d < 1e-2 {
				t.Fatalf("adapters moved the logits by only %.2e: the test proves nothing", d)
			}
			// Through the KV cache too: the merged model's logits are the reference here.
			mg := g
			mg.Logits = make([][][]float64, len(g.Sequences))
			for b, s := range g.Sequences {
				pad := longest - len(s)
				for p := range s {
					row := want[(b*longest+pad+p)*cfg.Vocab : (b*longest+pad+p+1)*cfg.Vocab]
					r64 := make([]float64, len(row))
					for i, v := range row {
						r64[i] = float64(v)
					}
					mg.Logits[b] = append(mg.Logits[b], r64)
				}
			}
			gen, err := NewGenerator(testbackend.Sequential(), store.RootScope(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d := cachedWith(t, gen, cfg, mg, 8); d > 1e-4 {
				t.Errorf("cached path with adapters vs merged weights: max |Δ| %.2e", d)
			}
			shapes, err := l.PEFTShapes(cfg)
			if err != nil {
				t.Fatal(err)
			}
			fused := cfg.Family == modelcfg.FamilyPhi3
			_, hasFused := shapes["base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight"]
			_, hasQ := shapes["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
			if hasFused != fused || hasQ == fused {
				t.Errorf("PEFT names for %s: qkv_proj %v, q_proj %v", cfg.Family, hasFused, hasQ)
			}
		})
	}
}
