package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/testbackend"
)

// stepRun is what one forward-and-backward graph gave: logits, the gradient of every trainable
// variable (model weights, or the LoRA adapters), and the executor's estimate of the largest
// total of intermediate values live at once.
type stepRun struct {
	logits  []float32
	grads   map[string][]float32
	mem     int64
	kernels int // blocked attention forward nodes in the graph (recomputations included)
}

// runStep differentiates Σ logits·R (R fixed and random, so every logit's gradient matters) with
// respect to the trainable variables of cfg on the rows (left- or right-padded to seq). With lora
// the adapters are attached (random, dropout on) and are the only variables differentiated.
func runStep(t *testing.T, cfg Config, w map[string][]float32, rows [][]int, seq int, right bool, lora *LoRA) stepRun {
	t.Helper()
	store := newStore(t, cfg, w)
	specs := cfg.Variables()
	if lora != nil {
		if err := AttachLoRA(store.RootScope(), cfg, *lora); err != nil {
			t.Fatal(err)
		}
		if err := ImportLoRA(store.RootScope(), cfg, randomAdapters(t, cfg, *lora, 5, 0.2)); err != nil {
			t.Fatal(err)
		}
		var err error
		if specs, err = lora.Variables(cfg); err != nil {
			t.Fatal(err)
		}
	}
	tok, pos, mask := leftPadded(rows, seq)
	if right {
		tok, pos, mask = rightPadded(rows, seq)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	r := make([]float32, len(rows)*seq*cfg.Vocab)
	for i := range r {
		r[i] = float32(rng.NormFloat64())
	}
	exec, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, tk, ps, mk *Node) []*Node {
		g := tk.Graph()
		if lora != nil {
			SetLoRATrainingStep(scope, g, Const(g, int64(3)))
		}
		logits := Forward(scope, cfg, tk, ps, mk)
		loss := ReduceAllSum(Mul(logits, Reshape(Const(g, r), len(rows), seq, cfg.Vocab)))
		vars := make([]*Node, len(specs))
		for i, s := range specs {
			vars[i] = store.GetVariable(gm.JoinPath(scope.Scope(), s.Path)).NodeValue(g)
		}
		return append([]*Node{logits}, Gradient(loss, vars...)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	b := len(rows)
	g, err := exec.Compile(shapes.Make(dtypes.Int32, b, seq), shapes.Make(dtypes.Int32, b, seq), shapes.Make(dtypes.Bool, b, seq))
	if err != nil {
		t.Fatal(err)
	}
	est, ok := g.Executable().(interface{ EstimatedTemporaryMemory() int64 })
	if !ok {
		t.Fatalf("executable %T has no EstimatedTemporaryMemory (Temper's compute fork)", g.Executable())
	}
	outs, err := exec.Call(tok, pos, mask)
	if err != nil {
		t.Fatal(err)
	}
	run := stepRun{logits: tensors.MustCopyFlatData[float32](outs[0]), grads: map[string][]float32{}, mem: est.EstimatedTemporaryMemory()}
	for _, n := range g.Nodes() {
		if n.Type() == NodeTypeFusedScaledDotProductAttention {
			run.kernels++
		}
	}
	for i, s := range specs {
		run.grads[s.Path] = tensors.MustCopyFlatData[float32](outs[1+i])
	}
	return run
}

// rightPadded is leftPadded with the padding after each row (training batches).
func rightPadded(rows [][]int, seq int) (tok, pos [][]int32, mask [][]bool) {
	for _, r := range rows {
		tr, pr, mr := make([]int32, seq), make([]int32, seq), make([]bool, seq)
		for i, v := range r {
			tr[i], pr[i], mr[i] = int32(v), int32(i), true
		}
		tok, pos, mask = append(tok, tr), append(pos, pr), append(mask, mr)
	}
	return
}

// relDiff is max |a−b| over max(1, max |b|): float32 rounding scaled to the tensor's magnitude.
func relDiff(a, b []float32) float64 {
	var d, m float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = math.Max(m, math.Abs(float64(b[i])))
	}
	return d / math.Max(1, m)
}

func bitsEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// raggedRows are token rows of lengths 150, 97 and 3 over vocab: with the kernel's blocks of 96,
// a whole block and a partial one, a whole block and one column, one partial block.
func raggedRows(vocab int) [][]int {
	rng := rand.New(rand.NewPCG(4, 4))
	var rows [][]int
	for _, n := range []int{150, 97, 3} {
		r := make([]int, n)
		for i := range r {
			r[i] = rng.IntN(vocab)
		}
		rows = append(rows, r)
	}
	return rows
}

// blockedCases are the reference families (testdata/families, every feature on: GQA, soft-caps,
// sliding layers with windows of 5 and 6, q/k norms, partial rotary…), plus windows that span
// several blocks of the kernel.
func blockedCases(t *testing.T) map[string]Config {
	cases := map[string]Config{}
	weights := map[string]map[string][]float32{}
	for _, fd := range loadFamilyDirs(t) {
		if strings.HasSuffix(fd.dir, "-old") {
			name := strings.TrimSuffix(fd.dir[strings.LastIndex(fd.dir, "/")+1:], "-old")
			fd.cfg.MaxSeq = 256 // the references are short; these rows are not
			cases[name] = fd.cfg
			weights[name] = fd.weights
		}
	}
	for _, w := range []int{64, 70} {
		c := cases["mistral"].Clone()
		c.SlidingWindow = w
		cases[fmt.Sprintf("mistral-window%d", w)] = c
		weights[fmt.Sprintf("mistral-window%d", w)] = weights["mistral"]
	}
	blockedWeights = weights
	return cases
}

var blockedWeights map[string]map[string][]float32

// TestBlockedAttentionMatchesPlain: the blocked kernel against the [seq × seq] path through whole
// models of every family, on ragged rows (150, 97 and 3 tokens) left-padded (prefill) and
// right-padded (training): logits and the gradient of every weight agree to 1e-5 (relative to
// each tensor's magnitude), and the blocked step needs less memory.
func TestBlockedAttentionMatchesPlain(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-model gradients of nine families: a few seconds")
	}
	for name, cfg := range blockedCases(t) {
		for _, right := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/right=%v", name, right), func(t *testing.T) {
				rows := raggedRows(cfg.Vocab)
				plain, blocked := cfg.Clone(), cfg.Clone()
				plain.Attention, blocked.Attention = modelcfg.AttentionPlain, modelcfg.AttentionBlocked
				p := runStep(t, plain, blockedWeights[name], rows, 150, right, nil)
				b := runStep(t, blocked, blockedWeights[name], rows, 150, right, nil)
				if d := relDiff(b.logits, p.logits); d > 1e-5 {
					t.Errorf("logits differ by %.3g > 1e-5", d)
				}
				worst, at := 0.0, ""
				for path, gp := range p.grads {
					if d := relDiff(b.grads[path], gp); d > worst {
						worst, at = d, path
					}
				}
				if worst > 1e-5 {
					t.Errorf("gradient of %s differs by %.3g > 1e-5", at, worst)
				}
				if b.mem >= p.mem {
					t.Errorf("blocked step's estimated memory %d >= plain %d", b.mem, p.mem)
				}
				t.Logf("logits %.2g, gradients %.2g (%s); memory %d → %d", relDiff(b.logits, p.logits), worst, at, p.mem, b.mem)
			})
		}
	}
}

// TestBlockedPrefillMatchesPlain: generation whose prefill runs blocked attention (the KV cache
// written from it) gives the plain path's tokens, and log-probs within 1e-5.
func TestBlockedPrefillMatchesPlain(t *testing.T) {
	cases := blockedCases(t)
	for _, name := range []string{"llama", "gemma2", "mistral-window70"} {
		t.Run(name, func(t *testing.T) {
			var runs [2][]Completion
			for i, mode := range []string{modelcfg.AttentionPlain, modelcfg.AttentionBlocked} {
				cfg := cases[name].Clone()
				cfg.Attention = mode
				store := newStore(t, cfg, blockedWeights[name])
				gen, err := NewGenerator(testbackend.Sequential(), store.RootScope(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				prompts := raggedRows(cfg.Vocab)
				if runs[i], err = gen.Generate(prompts, sample.Options{MaxNewTokens: 6}); err != nil {
					t.Fatal(err)
				}
			}
			for r := range runs[0] {
				p, b := runs[0][r], runs[1][r]
				if fmt.Sprint(p.Tokens) != fmt.Sprint(b.Tokens) {
					t.Fatalf("row %d: blocked prefill generated %v, plain %v", r, b.Tokens, p.Tokens)
				}
				if d := relDiff(b.LogProbs, p.LogProbs); d > 1e-5 {
					t.Errorf("row %d: log-probs differ by %.3g", r, d)
				}
			}
		})
	}
}

// TestAttentionChoice: "auto" keeps the plain path below BlockedAttentionMinSeq (the presets'
// graphs are unchanged) and takes the kernel from there on; "plain" and "blocked" force a path.
func TestAttentionChoice(t *testing.T) {
	g := NewGraph(testbackend.Sequential(), "choice")
	defer g.Finalize()
	for _, tc := range []struct {
		mode string
		seq  int
		want bool
	}{
		{"", modelcfg.BlockedAttentionMinSeq - 1, false}, {"", modelcfg.BlockedAttentionMinSeq, true}, {modelcfg.AttentionAuto, 512, false},
		{modelcfg.AttentionAuto, 4096, true}, {modelcfg.AttentionPlain, 16384, false}, {modelcfg.AttentionBlocked, 8, true},
	} {
		cfg := tinyConfigs()["llama"]
		cfg.Attention = tc.mode
		if got := blockedAttention(cfg, g, tc.seq); got != tc.want {
			t.Errorf("attention=%q seq=%d: blocked=%v, want %v", tc.mode, tc.seq, got, tc.want)
		}
	}
	cfg := tinyConfigs()["llama"]
	for _, bad := range []struct{ attention, remat, want string }{
		{"flash", "", `attention="flash": allowed ["auto" "plain" "blocked"]`},
		{"", "full", `remat="full": allowed ["none" "layer" "attention"]`},
	} {
		c := cfg
		c.Attention, c.Remat = bad.attention, bad.remat
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("attention=%q remat=%q: error %v, want %q", bad.attention, bad.remat, err, bad.want)
		}
	}
}

// TestFusedDecodeMatchesPlain: cached generation whose decode steps attend with the fork's fused
// decode kernel (Attention "auto" on the Go backend) continues every reference family (GQA,
// soft-caps, sliding layers with windows the rows outgrow while decoding) with the plain graph's
// greedy tokens, log-probs within 1e-5; its decode graph has one kernel node per layer (which
// also writes the cache rows), the plain one none and two ScatterSums per layer instead.
func TestFusedDecodeMatchesPlain(t *testing.T) {
	for name, base := range blockedCases(t) {
		t.Run(name, func(t *testing.T) {
			var runs [2][]Completion
			for i, mode := range []string{modelcfg.AttentionPlain, modelcfg.AttentionAuto} {
				cfg := base.Clone()
				cfg.Attention = mode
				gen, err := NewGenerator(testbackend.Sequential(), newStore(t, cfg, blockedWeights[name]).RootScope(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if runs[i], err = gen.Generate(raggedRows(cfg.Vocab), sample.Options{MaxNewTokens: 8}); err != nil {
					t.Fatal(err)
				}
				const b, s = 4, 64
				in := []shapes.Shape{shapes.Make(dtypes.Int32, b, 1), shapes.Make(dtypes.Int32, b, 1),
					shapes.Make(dtypes.Int32), shapes.Make(dtypes.Bool, b, s)}
				for range 2 * cfg.Layers {
					in = append(in, shapes.Make(dtypes.Float32, b*cfg.KVHeads, s, cfg.HeadDim))
				}
				g, err := gen.decode.Compile(in...)
				if err != nil {
					t.Fatal(err)
				}
				kernels, scatters := 0, 0
				for _, n := range g.Nodes() {
					switch n.Type() {
					case NodeTypeFusedScaledDotProductAttention:
						kernels++
					case NodeTypeScatterSum:
						scatters++
					}
				}
				if want := map[bool]int{true: 0, false: cfg.Layers}[mode == modelcfg.AttentionPlain]; kernels != want {
					t.Errorf("attention=%q: %d fused attention nodes in the decode graph, want %d", mode, kernels, want)
				}
				// The kernel writes the new key and value rows itself; the plain graph scatters them.
				if want := map[bool]int{true: 2 * cfg.Layers, false: 0}[mode == modelcfg.AttentionPlain]; scatters != want {
					t.Errorf("attention=%q: %d ScatterSum nodes in the decode graph, want %d", mode, scatters, want)
				}
			}
			worst := 0.0
			for r := range runs[0] {
				p, f := runs[0][r], runs[1][r]
				if fmt.Sprint(p.Tokens) != fmt.Sprint(f.Tokens) {
					t.Fatalf("row %d: fused decode generated %v, plain %v", r, f.Tokens, p.Tokens)
				}
				worst = max(worst, relDiff(f.LogProbs, p.LogProbs))
			}
			if worst > 1e-5 {
				t.Errorf("log-probs differ by %.3g > 1e-5", worst)
			}
			t.Logf("same tokens; log-probs differ by %.2g", worst)
		})
	}
}

// TestDecodeFusedChoice: cached decoding takes the fused kernel on the Go backend unless attention
// is "plain".
func TestDecodeFusedChoice(t *testing.T) {
	g := NewGraph(testbackend.Sequential(), "choice")
	defer g.Finalize()
	for mode, want := range map[string]bool{"": true, modelcfg.AttentionAuto: true, modelcfg.AttentionBlocked: true, modelcfg.AttentionPlain: false} {
		cfg := tinyConfigs()["llama"]
		cfg.Attention = mode
		if got := decodeFused(cfg, g); got != want {
			t.Errorf("attention=%q: fused decode %v, want %v", mode, got, want)
		}
	}
}
