package model

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/testbackend"
)

// randomAdapters gives every adapter of l on cfg random values (B non-zero, unlike a fresh attach).
func randomAdapters(t testing.TB, cfg Config, l LoRA, seed uint64, std float64) map[string][]float32 {
	t.Helper()
	specs, err := l.Variables(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	w := map[string][]float32{}
	for _, v := range specs {
		d := make([]float32, v.Size())
		for i := range d {
			d[i] = float32(std * rng.NormFloat64())
		}
		w[v.Path] = d
	}
	return w
}

// loraForward runs Forward on store's root scope; step >= 0 marks it a training graph at that step.
func loraForward(t testing.TB, cfg Config, store *gm.Store, tok, pos [][]int32, mask [][]bool, step int64) []float32 {
	t.Helper()
	exec, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, tk, ps, mk *Node) *Node {
		if step >= 0 {
			SetLoRATrainingStep(scope, tk.Graph(), Const(tk.Graph(), step))
		}
		return Forward(scope, cfg, tk, ps, mk)
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Call(tok, pos, mask)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](out[0])
}

var loraRows = [][]int{{1, 5, 9, 2, 33, 7, 4, 11}, {3, 3, 8, 20, 1}, {36, 0}}

// withMode forces a LoRA formulation until the test ends (loraAuto restores the cost model).
func withMode(t *testing.T, mode string) {
	loraForceMode = mode
	t.Cleanup(func() { loraForceMode = loraAuto })
}

func maxAbs(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// TestLoRAZeroInitIsBase: attaching fresh adapters (B = 0) leaves every logit exactly as it was.
func TestLoRAZeroInitIsBase(t *testing.T) {
	for name, cfg := range tinyConfigs() {
		t.Run(name, func(t *testing.T) {
			store := newStore(t, cfg, randomWeights(cfg, 7, 0.15))
			tok, pos, mask := leftPadded(loraRows, 8)
			base := runForward(t, cfg, store, tok, pos, mask)
			if err := AttachLoRA(store.RootScope(), cfg, LoRA{Rank: 4, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			for _, mode := range []string{loraExplicit, loraMerged} {
				withMode(t, mode)
				got := runForward(t, cfg, store, tok, pos, mask)
				for i := range base {
					if got[i] != base[i] {
						t.Fatalf("%s: logit %d: %v with fresh adapters, %v without", mode, i, got[i], base[i])
					}
				}
			}
			withMode(t, loraAuto)
			a, err := ExportLoRA(store.RootScope(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			nonZeroA := false
			for p, v := range a {
				for _, x := range v {
					if strings.HasSuffix(p, "/b") && x != 0 {
						t.Fatalf("%s not zero-initialised", p)
					}
					nonZeroA = nonZeroA || (strings.HasSuffix(p, "/a") && x != 0)
				}
			}
			if !nonZeroA {
				t.Fatal("A is all zeros: adapters could never train")
			}
		})
	}
}

// TestLoRAMatchesMergedReference: the graph with adapters equals (1) the plain-Go reference model
// run on MergeLoRA's weights and (2) the graph run on those merged weights, to 1e-5.
func TestLoRAMatchesMergedReference(t *testing.T) {
	targets := map[string][]string{
		"llama": {"all-linear"},
		"gemma": {"q_proj", "v_proj", "down_proj"},            // gaps in the fused qkv columns
		"qwen2": {"self_attn.k_proj", "model.layers.1.mlp.*"}, // suffix and a one-layer glob
	}
	for name, cfg := range tinyConfigs() {
		t.Run(name, func(t *testing.T) {
			l := LoRA{Rank: 3, Alpha: 5, Targets: targets[name]}
			w := randomWeights(cfg, 7, 0.15)
			ad := randomAdapters(t, cfg, l, 11, 0.2)
			store := newStore(t, cfg, w)
			if err := AttachLoRA(store.RootScope(), cfg, l); err != nil {
				t.Fatal(err)
			}
			if err := ImportLoRA(store.RootScope(), cfg, ad); err != nil {
				t.Fatal(err)
			}
			tok, pos, mask := leftPadded(loraRows, 8)
			withMode(t, loraMerged)
			mergedMode := runForward(t, cfg, store, tok, pos, mask)
			withMode(t, loraExplicit)
			withAdapters := runForward(t, cfg, store, tok, pos, mask)
			withMode(t, loraAuto)
			if d := maxAbs(withAdapters, mergedMode); d > 1e-5 {
				t.Fatalf("explicit and merged formulations differ by %.2e", d)
			}
			base := runForward(t, cfg, newStore(t, cfg, w), tok, pos, mask)
			merged, err := MergeLoRA(cfg, l, w, ad)
			if err != nil {
				t.Fatal(err)
			}
			mergedLogits := runForward(t, cfg, newStore(t, cfg, merged), tok, pos, mask)
			ref := refModel{cfg, merged}
			var maxMerged, maxRef, maxDelta float64
			for b, r := range loraRows {
				toks, poss := make([]int, 8), make([]int, 8)
				for i := range 8 {
					toks[i], poss[i] = int(tok[b][i]), int(pos[b][i])
				}
				want := ref.forwardRow(toks, poss, mask[b])
				for ti := 8 - len(r); ti < 8; ti++ {
					for v := range cfg.Vocab {
						k := (b*8+ti)*cfg.Vocab + v
						got := float64(withAdapters[k])
						maxMerged = math.Max(maxMerged, math.Abs(got-float64(mergedLogits[k])))
						maxRef = math.Max(maxRef, math.Abs(got-want[ti][v]))
						maxDelta = math.Max(maxDelta, math.Abs(got-float64(base[k])))
					}
				}
			}
			t.Logf("%s: max |Δ| adapters vs merged graph %.2e, vs merged reference %.2e; adapters moved logits by %.2f",
				name, maxMerged, maxRef, maxDelta)
			if maxMerged > 1e-5 || maxRef > 1e-4 {
				t.Fatalf("adapters vs merged: %.2e (want <= 1e-5), vs reference %.2e (want <= 1e-4)", maxMerged, maxRef)
			}
			if maxDelta < 1e-2 {
				t.Fatalf("adapters changed the logits by only %.2e: the test proves nothing", maxDelta)
			}
			// Detaching restores the base graph exactly.
			if err := DetachLoRA(store.RootScope()); err != nil {
				t.Fatal(err)
			}
			if _, ok := AttachedLoRA(store.RootScope()); ok {
				t.Fatal("still attached after DetachLoRA")
			}
			if got := runForward(t, cfg, store, tok, pos, mask); !slices.Equal(got, base) {
				t.Fatal("logits after DetachLoRA differ from the base")
			}
		})
	}
}

// TestLoRADropout: training graphs drop adapter inputs with a mask fixed by (seed, step); graphs
// without a step apply none.
func TestLoRADropout(t *testing.T) {
	cfg := tinyConfigs()["llama"]
	l := LoRA{Rank: 4, Dropout: 0.5, Seed: 9, Targets: []string{"attn.*", "mlp.*"}}
	w := randomWeights(cfg, 7, 0.15)
	store := newStore(t, cfg, w)
	if err := AttachLoRA(store.RootScope(), cfg, l); err != nil {
		t.Fatal(err)
	}
	if err := ImportLoRA(store.RootScope(), cfg, randomAdapters(t, cfg, l, 5, 0.3)); err != nil {
		t.Fatal(err)
	}
	tok, pos, mask := leftPadded(loraRows, 8)
	eval := runForward(t, cfg, store, tok, pos, mask)
	s3a := loraForward(t, cfg, store, tok, pos, mask, 3)
	s3b := loraForward(t, cfg, store, tok, pos, mask, 3)
	s4 := loraForward(t, cfg, store, tok, pos, mask, 4)
	if !slices.Equal(s3a, s3b) {
		t.Fatal("same step, different dropout masks")
	}
	if slices.Equal(s3a, s4) || slices.Equal(s3a, eval) {
		t.Fatal("dropout did not change the logits between steps / against evaluation")
	}
	// Without dropout a training graph is the evaluation graph.
	l.Dropout = 0
	store0 := newStore(t, cfg, w)
	if err := AttachLoRA(store0.RootScope(), cfg, l); err != nil {
		t.Fatal(err)
	}
	if err := ImportLoRA(store0.RootScope(), cfg, randomAdapters(t, cfg, l, 5, 0.3)); err != nil {
		t.Fatal(err)
	}
	// Compared within one formulation: explicit and merged differ by float reassociation, which is
	// not what this checks.
	for _, mode := range []string{loraExplicit, loraMerged} {
		withMode(t, mode)
		eval0 := runForward(t, cfg, store0, tok, pos, mask)
		if d := maxAbs(loraForward(t, cfg, store0, tok, pos, mask, 3), eval0); d > 1e-6 {
			t.Fatalf("dropout 0, %s: training logits differ from evaluation by %.2e", mode, d)
		}
	}
}

func TestLoRATargetsAndValidate(t *testing.T) {
	cfg := tinyConfigs()["llama"] // 2 layers
	shorts := func(ms []LoRAModule) string {
		var s []string
		for _, m := range ms {
			s = append(s, strings.TrimPrefix(m.Name, "model.layers."))
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		targets []string
		want    string
	}{
		{nil, "0.self_attn.q_proj 0.self_attn.k_proj 0.self_attn.v_proj 0.self_attn.o_proj 0.mlp.gate_proj 0.mlp.up_proj 0.mlp.down_proj " +
			"1.self_attn.q_proj 1.self_attn.k_proj 1.self_attn.v_proj 1.self_attn.o_proj 1.mlp.gate_proj 1.mlp.up_proj 1.mlp.down_proj"},
		{[]string{"v_proj", "q_proj"}, "0.self_attn.q_proj 0.self_attn.v_proj 1.self_attn.q_proj 1.self_attn.v_proj"},
		{[]string{"mlp.*"}, "0.mlp.gate_proj 0.mlp.up_proj 0.mlp.down_proj 1.mlp.gate_proj 1.mlp.up_proj 1.mlp.down_proj"},
		{[]string{"model.layers.1.self_attn.o_proj", "mlp.up_proj"}, "0.mlp.up_proj 1.self_attn.o_proj 1.mlp.up_proj"},
		{[]string{"model.layers.0.*"}, "0.self_attn.q_proj 0.self_attn.k_proj 0.self_attn.v_proj 0.self_attn.o_proj 0.mlp.gate_proj 0.mlp.up_proj 0.mlp.down_proj"},
		{[]string{"*_proj"}, ""}, // every module (checked by count below)
	} {
		ms, err := LoRA{Targets: tc.targets}.Modules(cfg)
		if err != nil {
			t.Fatalf("%q: %v", tc.targets, err)
		}
		if tc.want == "" {
			if len(ms) != 14 {
				t.Fatalf("%q: %d modules, want 14", tc.targets, len(ms))
			}
			continue
		}
		if got := shorts(ms); got != tc.want {
			t.Fatalf("%q:\n got %s\nwant %s", tc.targets, got, tc.want)
		}
	}
	// Fused columns: q | k | v within qkv, gate | up within gate_up.
	ms, _ := LoRA{Targets: []string{"k_proj", "up_proj"}}.Modules(cfg)
	nh, nkv := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	if m := ms[0]; m.Var != "layers/0/attn/qkv" || m.Lo != nh || m.Hi != nh+nkv || m.In != cfg.DModel {
		t.Fatalf("k_proj module %+v", m)
	}
	if m := ms[1]; m.Var != "layers/0/mlp/gate_up" || m.Lo != cfg.FFN || m.Hi != 2*cfg.FFN {
		t.Fatalf("up_proj module %+v", m)
	}

	for _, tc := range []struct {
		l    LoRA
		want string
	}{
		{LoRA{Rank: -1}, "rank=-1"},
		{LoRA{Alpha: -2}, "alpha=-2"},
		{LoRA{Dropout: 1}, "dropout=1"},
		{LoRA{Targets: []string{"q_prj"}}, `targets[0]="q_prj"`},
		{LoRA{Targets: []string{"q_proj", ""}}, "targets[1]"},
		{LoRA{Targets: []string{"model.layers.[.*"}}, "bad glob"},
	} {
		err := tc.l.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: error %v, want it to name %q", tc.l, err, tc.want)
		}
	}
	if _, err := (LoRA{Targets: []string{"model.layers.5.self_attn.q_proj"}}).Modules(cfg); err == nil ||
		!strings.Contains(err.Error(), "matches no module") {
		t.Fatalf("layer 5 of a 2-layer model: %v", err)
	}
	if l := (LoRA{Rank: 4}).WithDefaults(); l.Alpha != 8 || l.Scale() != 2 || !slices.Equal(l.Targets, []string{"all-linear"}) {
		t.Fatalf("defaults: %+v", l)
	}
}

// TestLoRAPEFTRoundTrip: PEFT tensor names and shapes, internal → PEFT → internal, and
// adapter_config.json both ways.
func TestLoRAPEFTRoundTrip(t *testing.T) {
	cfg := tinyConfigs()["qwen2"]
	for _, targets := range [][]string{{"q_proj", "v_proj", "down_proj"}, {"model.layers.1.self_attn.*", "up_proj"}} {
		l := LoRA{Rank: 2, Alpha: 16, Dropout: 0.1, Targets: targets}
		ad := randomAdapters(t, cfg, l, 1, 1)
		peft, shp, err := l.ToPEFT(cfg, ad)
		if err != nil {
			t.Fatal(err)
		}
		const qa = "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"
		if !slices.Equal(shp[qa], []int{2, cfg.DModel}) {
			t.Fatalf("%q: shape %v, want [2 %d] (names: %d)", qa, shp[qa], cfg.DModel, len(shp))
		}
		mlpB, mlpOut := "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight", cfg.DModel
		if targets[1] == "up_proj" {
			mlpB, mlpOut = "base_model.model.model.layers.1.mlp.up_proj.lora_B.weight", cfg.FFN
		}
		if s := shp[mlpB]; !slices.Equal(s, []int{mlpOut, 2}) {
			t.Fatalf("%s: shape %v, want [%d 2]", mlpB, s, mlpOut)
		}
		// PEFT's lora_A is [r, in]: element (k, i) is our A[i, k].
		m := LoRAModule{Name: "model.layers.1.self_attn.q_proj", Short: "q_proj", Layer: 1, In: cfg.DModel}
		if got, want := peft[qa][1*cfg.DModel+5], ad[m.PathA()][5*2+1]; got != want {
			t.Fatalf("lora_A[1,5] = %v, want A[5,1] = %v", got, want)
		}
		back, err := l.FromPEFT(cfg, peft)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range ad {
			if !slices.Equal(back[k], v) {
				t.Fatalf("%s changed in the round trip", k)
			}
		}
		extra := map[string][]float32{"base_model.model.lm_head.lora_A.weight": {1}}
		for k, v := range peft {
			extra[k] = v
		}
		if _, err := l.FromPEFT(cfg, extra); err == nil || !strings.Contains(err.Error(), "lm_head") {
			t.Fatalf("extra tensor: %v", err)
		}

		js, err := l.PEFTConfigJSON(cfg, "file:///runs/r/pretrain/step-000100/")
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(js, &raw); err != nil {
			t.Fatal(err)
		}
		if raw["peft_type"] != "LORA" || raw["r"] != 2.0 || raw["lora_alpha"] != 16.0 || raw["base_model_name_or_path"] != "file:///runs/r/pretrain/step-000100/" {
			t.Fatalf("adapter_config.json: %s", js)
		}
		l2, base, err := ParsePEFTConfig(js)
		if err != nil {
			t.Fatal(err)
		}
		if base != "file:///runs/r/pretrain/step-000100/" || !SameAdapters(cfg, l, l2) || l2.Dropout != 0.1 {
			t.Fatalf("parsed %+v base %q from %s", l2, base, js)
		}
		t.Logf("target_modules for %q: %v", targets, raw["target_modules"])
	}
	for _, bad := range []string{
		`{"peft_type":"IA3","r":8,"lora_alpha":8,"target_modules":["q_proj"]}`,
		`{"peft_type":"LORA","r":8,"lora_alpha":8,"target_modules":".*q_proj"}`,
		`{"peft_type":"LORA","r":8,"lora_alpha":8,"target_modules":["q_proj"],"use_dora":true}`,
		`{"peft_type":"LORA","r":8,"lora_alpha":8,"target_modules":["q_proj"],"modules_to_save":["lm_head"]}`,
		`{"peft_type":"LORA","r":0,"lora_alpha":8,"target_modules":["q_proj"]}`,
	} {
		if _, _, err := ParsePEFTConfig([]byte(bad)); err == nil {
			t.Fatalf("accepted %s", bad)
		}
	}
}

// TestLoRACostModel: the formulation choice follows the measured trade-off on the Go backend.
func TestLoRACostModel(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		n, in, width, k, r   int
		training, wantMerged bool
	}{
		{"small preset qkv, training 16x64", 1024, 128, 256, 3, 8, true, true},
		{"small preset down, training", 1024, 384, 128, 1, 8, true, true},
		{"base preset gate_up, training", 1024, 384, 2048, 2, 8, true, false},
		{"1B gate_up, training", 4096, 2048, 16384, 2, 16, true, false},
		{"1B q, one-token decode", 1, 2048, 2048, 1, 16, false, false},
		{"small qkv, prefill", 1024, 128, 256, 3, 8, false, true},
	} {
		if got := loraMergedCheaper(tc.n, tc.in, tc.width, tc.k, tc.r, tc.training); got != tc.wantMerged {
			t.Errorf("%s: merged=%v, want %v", tc.name, got, tc.wantMerged)
		}
	}
}

// TestLoRACachedDecodeMatchesMerged: cached generation with adapters attached — whose decode step
// reads q, k and v in place from the adapted fused projection (decodeAttentionPacked through
// fusedLinear) — generates what the merged weights generate, in both adapter formulations, with
// log-probs within 1e-5; and the adapters change what is generated (else the test proves nothing).
func TestLoRACachedDecodeMatchesMerged(t *testing.T) {
	for name, cfg := range tinyConfigs() {
		t.Run(name, func(t *testing.T) {
			l := LoRA{Rank: 3, Alpha: 5, Targets: []string{"all-linear"}}
			w := randomWeights(cfg, 7, 0.15)
			ad := randomAdapters(t, cfg, l, 11, 0.3)
			generate := func(store *gm.Store) []Completion {
				t.Helper()
				gen, err := NewGenerator(testbackend.Sequential(), store.RootScope(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				out, err := gen.Generate(loraRows, sample.Options{MaxNewTokens: 8})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			merged, err := MergeLoRA(cfg, l, w, ad)
			if err != nil {
				t.Fatal(err)
			}
			want := generate(newStore(t, cfg, merged))
			base := generate(newStore(t, cfg, w))
			changed := false
			for r := range want {
				changed = changed || !slices.Equal(want[r].Tokens, base[r].Tokens)
			}
			if !changed {
				t.Fatal("the adapters change no generated token: the test proves nothing")
			}
			for _, mode := range []string{loraExplicit, loraMerged} {
				withMode(t, mode)
				store := newStore(t, cfg, w)
				if err := AttachLoRA(store.RootScope(), cfg, l); err != nil {
					t.Fatal(err)
				}
				if err := ImportLoRA(store.RootScope(), cfg, ad); err != nil {
					t.Fatal(err)
				}
				got := generate(store)
				worst := 0.0
				for r := range want {
					if !slices.Equal(got[r].Tokens, want[r].Tokens) {
						t.Fatalf("%s: row %d: adapters generated %v, merged weights %v", mode, r, got[r].Tokens, want[r].Tokens)
					}
					worst = max(worst, relDiff(got[r].LogProbs, want[r].LogProbs))
				}
				if worst > 1e-5 {
					t.Fatalf("%s: log-probs differ from the merged weights' by %.3g > 1e-5", mode, worst)
				}
				t.Logf("%s: same tokens as the merged weights; log-probs differ by %.2g", mode, worst)
			}
		})
	}
}
