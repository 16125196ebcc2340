package objective

import (
	"math"
	"sort"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/train/optimizer"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/testbackend"
)

// btRef is the plain-Go float64 reference of BTLoss.
func btRef(cfg objectivecfg.BTConfig, rc, rr, w []float64) (float64, map[string]float64) {
	var n, l, acc, margin, mc, mr, bt float64
	for i := range rc {
		d := rc[i] - rr[i]
		x := d - cfg.Margin
		// −log σ(x) = log(1 + e^{−x}), written stably.
		nls := math.Max(-x, 0) + math.Log1p(math.Exp(-math.Abs(x)))
		s := rc[i] + rr[i]
		l += w[i] * (nls + cfg.CenterCoef*s*s)
		bt += w[i] * nls
		if rc[i] > rr[i] {
			acc += w[i]
		}
		margin += w[i] * d
		mc += w[i] * rc[i]
		mr += w[i] * rr[i]
		n += w[i]
	}
	den := math.Max(n, 1e-9)
	return l / den, map[string]float64{"accuracy": acc / den, "margin": margin / den, "reward_chosen": mc / den,
		"reward_rejected": mr / den, "bt_loss": bt / den, "pairs": n, "lm_loss": 0}
}

func vec(x []float64) *tensors.Tensor {
	f := make([]float32, len(x))
	for i, v := range x {
		f[i] = float32(v)
	}
	return tensors.FromFlatDataAndDimensions(f, len(f))
}

// runBT evaluates BTLoss and its metrics, and the gradients d loss / d rc and d loss / d rr.
func runBT(t *testing.T, cfg objectivecfg.BTConfig, rc, rr, w []float64) (loss float64, metrics map[string]float64, grc, grr []float64) {
	t.Helper()
	outs := MustExecOnceN(testbackend.Sequential(), func(in []*Node) []*Node {
		l, m := BTLoss(cfg, in[0], in[1], in[2])
		g := Gradient(l, in[0], in[1])
		nodes := []*Node{l, g[0], g[1]}
		for _, k := range BTMetrics {
			if m[k] == nil {
				m[k] = ScalarZero(l.Graph(), l.DType()) // lm_loss belongs to BradleyTerry
			}
			nodes = append(nodes, m[k])
		}
		return nodes
	}, vec(rc), vec(rr), vec(w))
	metrics = map[string]float64{}
	for i, k := range BTMetrics {
		metrics[k] = float64(tensors.ToScalar[float32](outs[3+i]))
	}
	f64 := func(t *tensors.Tensor) []float64 {
		var out []float64
		for _, v := range tensors.MustCopyFlatData[float32](t) {
			out = append(out, float64(v))
		}
		return out
	}
	return float64(tensors.ToScalar[float32](outs[0])), metrics, f64(outs[1]), f64(outs[2])
}

func TestBTLossTable(t *testing.T) {
	ln2 := math.Log(2)
	cases := []struct {
		name       string
		cfg        objectivecfg.BTConfig
		rc, rr, w  []float64
		wantLoss   float64 // hand-computed
		wantAcc    float64
		wantMargin float64
	}{
		{"tie is log 2 and not accurate", objectivecfg.BTConfig{}, []float64{0}, []float64{0}, []float64{1}, ln2, 0, 0},
		{"equal nonzero rewards", objectivecfg.BTConfig{}, []float64{3, -2}, []float64{3, -2}, []float64{1, 1}, ln2, 0, 0},
		// −log σ(2) = log(1 + e^{−2}) = 0.126928011
		{"chosen ahead by 2", objectivecfg.BTConfig{}, []float64{1}, []float64{-1}, []float64{1}, 0.126928011, 1, 2},
		// −log σ(−2) = 2 + log(1 + e^{−2}) = 2.126928011
		{"rejected ahead by 2", objectivecfg.BTConfig{}, []float64{-1}, []float64{1}, []float64{1}, 2.126928011, 0, -2},
		// margin 1 on a lead of 1 is a tie again: log 2
		{"margin eats the lead", objectivecfg.BTConfig{Margin: 1}, []float64{1}, []float64{0}, []float64{1}, ln2, 1, 1},
		// centering: log 2 + 0.5·(1+1)² = 2.693147181
		{"centering term", objectivecfg.BTConfig{CenterCoef: 0.5}, []float64{1}, []float64{1}, []float64{1}, ln2 + 2, 0, 0},
		// padding rows (weight 0) are ignored whatever they hold
		{"padding row ignored", objectivecfg.BTConfig{CenterCoef: 0.01}, []float64{0, -100}, []float64{0, 100}, []float64{1, 0}, ln2, 0, 0},
		// mean of log 2 and −log σ(2)
		{"mean over pairs", objectivecfg.BTConfig{}, []float64{0, 1}, []float64{0, -1}, []float64{1, 1}, (ln2 + 0.126928011) / 2, 0.5, 1},
		// saturated: no overflow either way
		{"huge lead", objectivecfg.BTConfig{}, []float64{50}, []float64{-50}, []float64{1}, 0, 1, 100},
		{"huge deficit", objectivecfg.BTConfig{}, []float64{-50}, []float64{50}, []float64{1}, 100, 0, -100},
		{"no real pairs", objectivecfg.BTConfig{}, []float64{1, 2}, []float64{3, 4}, []float64{0, 0}, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gotL, gotM, _, _ := runBT(t, c.cfg, c.rc, c.rr, c.w)
			refL, refM := btRef(c.cfg, c.rc, c.rr, c.w)
			tol := func(want float64) float64 { return 1e-5 * math.Max(1, math.Abs(want)) }
			if math.Abs(refL-c.wantLoss) > 1e-8*math.Max(1, c.wantLoss) {
				t.Fatalf("reference loss %.9g, hand value %.9g", refL, c.wantLoss)
			}
			if math.Abs(gotL-c.wantLoss) > tol(c.wantLoss) {
				t.Errorf("loss %.7g, want %.7g", gotL, c.wantLoss)
			}
			if gotM["accuracy"] != c.wantAcc || math.Abs(gotM["margin"]-c.wantMargin) > tol(c.wantMargin) {
				t.Errorf("accuracy %g margin %g, want %g %g", gotM["accuracy"], gotM["margin"], c.wantAcc, c.wantMargin)
			}
			keys := make([]string, 0, len(refM))
			for k := range refM {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if math.Abs(gotM[k]-refM[k]) > tol(refM[k]) {
					t.Errorf("%s = %.7g, reference %.7g", k, gotM[k], refM[k])
				}
			}
		})
	}
}

// TestBTGradients: the loss pushes the chosen reward up and the rejected one down; at a tie with
// two real pairs each gradient is ∓σ(0)/2 = ∓0.25; the centering term adds 2λ(r_c+r_r)/n to both.
func TestBTGradients(t *testing.T) {
	_, _, gc, gr := runBT(t, objectivecfg.BTConfig{}, []float64{0, 0, 7}, []float64{0, 0, -7}, []float64{1, 1, 0})
	for i, want := range []float64{-0.25, -0.25, 0} {
		if math.Abs(gc[i]-want) > 1e-6 || math.Abs(gr[i]+want) > 1e-6 {
			t.Errorf("row %d: d/dr_c %g d/dr_r %g, want %g %g", i, gc[i], gr[i], want, -want)
		}
	}
	// Random pairs: signs always right without centering, and the magnitude is σ(−(Δ−m))/n.
	rc, rr := []float64{-3, -0.5, 0.2, 1.5, 4}, []float64{2, -0.4, 0.1, -1, 4.5}
	w := []float64{1, 1, 1, 1, 1}
	cfg := objectivecfg.BTConfig{Margin: 0.3}
	_, _, gc, gr = runBT(t, cfg, rc, rr, w)
	for i := range rc {
		want := -1 / (1 + math.Exp(rc[i]-rr[i]-cfg.Margin)) / 5
		if !(gc[i] < 0 && gr[i] > 0) || math.Abs(gc[i]-want) > 1e-6 || math.Abs(gr[i]+want) > 1e-6 {
			t.Errorf("row %d: d/dr_c %g d/dr_r %g, want %g %g", i, gc[i], gr[i], want, -want)
		}
	}
	cfg = objectivecfg.BTConfig{CenterCoef: 0.1}
	_, _, gc, gr = runBT(t, cfg, []float64{1}, []float64{1}, []float64{1})
	if want := -0.5 + 2*0.1*2; math.Abs(gc[0]-want) > 1e-6 || math.Abs(gr[0]-(0.5+0.4)) > 1e-6 {
		t.Errorf("centering: d/dr_c %g d/dr_r %g, want %g %g", gc[0], gr[0], want, 0.9)
	}
}

func TestBTConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  objectivecfg.BTConfig
		path string
	}{
		{objectivecfg.DefaultBT(), ""}, {objectivecfg.BTConfig{Margin: 1, CenterCoef: 0}, ""},
		{objectivecfg.BTConfig{Margin: -1}, "margin"}, {objectivecfg.BTConfig{Margin: math.NaN()}, "margin"},
		{objectivecfg.BTConfig{CenterCoef: -0.1}, "center_coef"}, {objectivecfg.BTConfig{CenterCoef: math.Inf(1)}, "center_coef"},
		{objectivecfg.BTConfig{LMCoef: 0.5}, ""}, {objectivecfg.BTConfig{LMCoef: -1}, "lm_coef"},
	} {
		err := c.cfg.Validate()
		if (err == nil) != (c.path == "") || (err != nil && !strings.Contains(err.Error(), c.path)) {
			t.Errorf("%+v: error %v, want one naming %q", c.cfg, err, c.path)
		}
	}
}

func rewardTestConfig(t *testing.T) model.Config {
	t.Helper()
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ValueHead, cfg.MaxSeq = true, 64
	return cfg
}

// pairSeqs right-pads token rows to seq and returns the RewardScores host inputs tokens,
// positions, valid, last and completion (the tokens after the row's first '=', or after the BOS
// when it has none).
func pairSeqs(rows [][]int, seq int) []*tensors.Tensor {
	n := len(rows)
	tok, pos := make([]int32, n*seq), make([]int32, n*seq)
	valid, last := make([]bool, n*seq), make([]int32, n)
	comp := make([]float32, n*seq)
	for r, row := range rows {
		start := completionStart(row)
		for i := range seq {
			pos[r*seq+i] = int32(i)
			tok[r*seq+i] = 256
			if i < len(row) {
				tok[r*seq+i], valid[r*seq+i] = int32(row[i]), true
				if i >= start {
					comp[r*seq+i] = 1
				}
			}
		}
		last[r] = int32(len(row) - 1)
	}
	return []*tensors.Tensor{tensors.FromFlatDataAndDimensions(tok, n, seq), tensors.FromFlatDataAndDimensions(pos, n, seq),
		tensors.FromFlatDataAndDimensions(valid, n, seq), tensors.FromFlatDataAndDimensions(last, n),
		tensors.FromFlatDataAndDimensions(comp, n, seq)}
}

// completionStart is the index of a test row's first completion token: after its first '=' (61),
// else after the BOS.
func completionStart(row []int) int {
	for i, id := range row {
		if id == 61 {
			return i + 1
		}
	}
	return 1
}

// btInputs lays out BradleyTerry's 11 inputs for equal-length chosen/rejected rows, all weighted 1.
func btInputs(chosen, rejected [][]int, seq int) []any {
	c, r := pairSeqs(chosen, seq), pairSeqs(rejected, seq)
	w := make([]float32, len(chosen))
	for i := range w {
		w[i] = 1
	}
	in := []*tensors.Tensor{c[0], c[1], c[2], c[3], r[0], r[1], r[2], r[3], tensors.FromFlatDataAndDimensions(w, len(w)), c[4], r[4]}
	args := make([]any, len(in))
	for i, x := range in {
		args[i] = x
	}
	return args
}

// TestSequenceRewardsReadLastToken: the reward of a row is model.Values at its last real token,
// whatever padding follows, and RewardScores reports the same numbers.
func TestSequenceRewardsReadLastToken(t *testing.T) {
	cfg := rewardTestConfig(t)
	store := gm.NewStore()
	if err := model.InitWeights(store.RootScope(), cfg, 5, 0.5); err != nil {
		t.Fatal(err)
	}
	rows := [][]int{{257, 49, 43, 50, 61, 51, 258}, {257, 55, 258}, {257, 57, 57, 43, 49, 61, 49, 48, 48, 258}}
	const seq = 16
	in := pairSeqs(rows, seq)
	exec, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, x []*Node) []*Node {
		return []*Node{SequenceRewards(scope, cfg, x[0], x[1], x[2], x[3], x[4]), model.Values(scope, cfg, x[0], x[1], x[2])}
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Call(in[0], in[1], in[2], in[3], in[4])
	if err != nil {
		t.Fatal(err)
	}
	r := tensors.MustCopyFlatData[float32](out[0])
	v := tensors.MustCopyFlatData[float32](out[1])
	for i, row := range rows {
		if want := v[i*seq+len(row)-1]; r[i] != want {
			t.Errorf("row %d: reward %g, want values[last] %g", i, r[i], want)
		}
	}
	if r[0] == r[1] || r[1] == r[2] {
		t.Fatalf("rewards should differ between rows: %v", r)
	}
	// The same row padded further reads the same reward (padding is invisible).
	in2 := pairSeqs(rows[:1], 32)
	out2, err := exec.Call(in2[0], in2[1], in2[2], in2[3], in2[4])
	if err != nil {
		t.Fatal(err)
	}
	if got := tensors.MustCopyFlatData[float32](out2[0])[0]; math.Abs(float64(got-r[0])) > 1e-5 {
		t.Errorf("padding changed the reward: %g vs %g", got, r[0])
	}
	obj := RewardScores(len(rows))
	sc, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, x []*Node) []*Node {
		_, m := obj.Build(scope, cfg, x)
		var outs []*Node
		for _, name := range obj.Metrics {
			outs = append(outs, m[name])
		}
		return outs
	})
	if err != nil {
		t.Fatal(err)
	}
	sout, err := sc.Call(in[0], in[1], in[2], in[3], in[4])
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if got := tensors.ToScalar[float32](sout[i]); math.Abs(float64(got-r[i])) > 1e-6 || obj.Metrics[i] != RewardScoreName+[]string{"000", "001", "002"}[i] {
			t.Errorf("%s = %g, want %g", obj.Metrics[i], got, r[i])
		}
	}
}

// TestBradleyTerryTrains: a few Adam steps on the full objective (trunk + head) separate four pairs
// whose chosen and rejected completions differ in one token; with lm_coef the chosen completions'
// cross-entropy is reported and falls too.
func TestBradleyTerryTrains(t *testing.T) {
	chosen := [][]int{{257, 49, 43, 49, 61, 50, 258}, {257, 50, 43, 50, 61, 52, 258}, {257, 51, 43, 49, 61, 52, 258}, {257, 49, 43, 51, 61, 52, 258}}
	rejected := [][]int{{257, 49, 43, 49, 61, 51, 258}, {257, 50, 43, 50, 61, 53, 258}, {257, 51, 43, 49, 61, 53, 258}, {257, 49, 43, 51, 61, 53, 258}}
	for _, c := range []struct {
		lm      float64
		logProb bool
	}{{0, false}, {0.5, false}, {0, true}} {
		lm := c.lm
		cfg := rewardTestConfig(t)
		cfg.RewardLogProb = c.logProb
		store := gm.NewStore()
		if err := model.InitWeights(store.RootScope(), cfg, 1, 0.02); err != nil {
			t.Fatal(err)
		}
		bt := objectivecfg.DefaultBT()
		bt.LMCoef = lm
		obj := BradleyTerry(bt)
		opt := optimizer.Adam().LearningRate(3e-3).Done()
		step, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, x []*Node) []*Node {
			l, m := obj.Build(scope, cfg, x)
			opt.UpdateGraph(scope, l.Graph(), l)
			lmLoss := ScalarZero(l.Graph(), l.DType())
			if m["lm_loss"] != nil {
				lmLoss = m["lm_loss"]
			}
			return []*Node{l, m["accuracy"], m["pairs"], lmLoss}
		})
		if err != nil {
			t.Fatal(err)
		}
		// The completion digit and EOS (positions 5 and 6) are what lm_coef trains.
		args := btInputs(chosen, rejected, 8)
		var first, last, acc, lm0, lmN float32
		for i := range 40 {
			out, err := step.Call(args...)
			if err != nil {
				t.Fatal(err)
			}
			last, acc, lmN = tensors.ToScalar[float32](out[0]), tensors.ToScalar[float32](out[1]), tensors.ToScalar[float32](out[3])
			if i == 0 {
				first, lm0 = last, lmN
				if p := tensors.ToScalar[float32](out[2]); p != 4 {
					t.Fatalf("pairs = %g, want 4", p)
				}
			}
		}
		t.Logf("lm_coef %g logprob %v: loss %.4f → %.4f, accuracy %.2f, lm_loss %.3f → %.3f after 40 Adam steps", lm, c.logProb, first, last, acc, lm0, lmN)
		if !(last < first/4) || acc != 1 {
			t.Fatalf("lm_coef %g: reward model did not learn the pairs: loss %.4f → %.4f, accuracy %.2f", lm, first, last, acc)
		}
		if lm > 0 && !(lm0 > 4 && lmN < lm0/4) || lm == 0 && lm0 != 0 {
			t.Fatalf("lm_coef %g: lm_loss %.3f → %.3f", lm, lm0, lmN)
		}
	}
	// The completion masks are required.
	defer func() {
		if recover() == nil {
			t.Error("BradleyTerry with 9 inputs should panic (the runtime turns it into an error)")
		}
	}()
	cfg := rewardTestConfig(t)
	store := gm.NewStore()
	_ = model.InitWeights(store.RootScope(), cfg, 1, 0.02)
	obj := BradleyTerry(objectivecfg.BTConfig{LMCoef: 1})
	args := btInputs(chosen, rejected, 8)[:9]
	exec, _ := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, x []*Node) *Node {
		l, _ := obj.Build(scope, cfg, x)
		return l
	})
	_, _ = exec.Call(args...)
}

// TestSequenceRewardsLogProbTerm: with model.Config.RewardLogProb the reward is the value at the
// last token plus α times the completion tokens' log-likelihood, computed here in plain Go from
// the model's logits (prompt, BOS and padding tokens excluded), for α = 1 (its initial value) and
// α = −0.5; without the flag the same weights give the value alone.
func TestSequenceRewardsLogProbTerm(t *testing.T) {
	cfg := rewardTestConfig(t)
	cfg.RewardLogProb = true
	rows := [][]int{{257, 49, 43, 50, 61, 51, 258}, {257, 55, 61, 258}, {257, 57, 57, 43, 49, 61, 49, 48, 48, 258}, {257, 50, 258}}
	const seq = 12
	in := pairSeqs(rows, seq)
	for _, alpha := range []float32{1, -0.5} {
		store := gm.NewStore()
		if err := model.InitWeights(store.RootScope(), cfg, 5, 0.5); err != nil {
			t.Fatal(err)
		}
		w, err := model.ExportWeights(store.RootScope(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if w[model.VarValueLP][0] != 1 {
			t.Fatalf("α starts at %g, want 1", w[model.VarValueLP][0])
		}
		w[model.VarValueLP][0] = alpha
		if err := model.ImportWeights(store.RootScope(), cfg, w); err != nil {
			t.Fatal(err)
		}
		exec, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, x []*Node) []*Node {
			plain := cfg
			plain.RewardLogProb = false
			return []*Node{SequenceRewards(scope, cfg, x[0], x[1], x[2], x[3], x[4]), model.Values(scope, cfg, x[0], x[1], x[2]),
				model.Forward(scope, cfg, x[0], x[1], x[2]), SequenceRewards(scope, plain, x[0], x[1], x[2], x[3], x[4])}
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Call(in[0], in[1], in[2], in[3], in[4])
		if err != nil {
			t.Fatal(err)
		}
		r, v := tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1])
		logits, plain := tensors.MustCopyFlatData[float32](out[2]), tensors.MustCopyFlatData[float32](out[3])
		vocab := cfg.Vocab
		for i, row := range rows {
			var lp float64
			for tk := completionStart(row); tk < len(row); tk++ {
				lp += sample.LogProb(logits[(i*seq+tk-1)*vocab:(i*seq+tk)*vocab], row[tk])
			}
			last := float64(v[i*seq+len(row)-1])
			want := last + float64(alpha)*lp
			if math.Abs(float64(r[i])-want) > 1e-4*math.Max(1, math.Abs(want)) {
				t.Errorf("α %g row %d: reward %g, want value %g + α·logp %g = %g", alpha, i, r[i], last, lp, want)
			}
			if math.Abs(float64(plain[i])-last) > 1e-6 {
				t.Errorf("row %d without the term: %g, want the value %g", i, plain[i], last)
			}
			if lp >= 0 {
				t.Errorf("row %d: log-likelihood %g of %d completion tokens must be negative", i, lp, len(row)-completionStart(row))
			}
		}
	}
}
