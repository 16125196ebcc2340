package objective

import (
	"fmt"
	"math"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/train/optimizer"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/testbackend"
)

// ppoCase is one PPOLoss input, [rows][seq] each.
type ppoCase struct {
	logp, old, adv, mask, values, oldV, ret, ent, ref [][]float64
}

// ppoRef is the plain-Go float64 reference of PPOLoss with dual clip and TIS off: the loss, its metrics
// and its gradients with respect to logp and values. It implements the formula of PPO's doc comment
// token by token.
func ppoRef(cfg losscfg.PolicyConfig, c ppoCase) (l float64, m map[string]float64, gLogp, gV [][]float64) {
	type agg struct{ num, den float64 }
	rows := len(c.mask)
	// Aggregation weights: token-mean weighs every counted token 1/N, seq-mean-token-mean 1/(|R|·n_i).
	w := make([][]float64, rows)
	var n, present float64
	for i := range c.mask {
		for _, mk := range c.mask[i] {
			n += mk
		}
	}
	for i := range c.mask {
		var ni float64
		for _, mk := range c.mask[i] {
			ni += mk
		}
		if ni > 0 {
			present++
		}
		w[i] = make([]float64, len(c.mask[i]))
		for t, mk := range c.mask[i] {
			switch cfg.Aggregation {
			case losscfg.AggTokenMean:
				w[i][t] = mk / math.Max(n, 1)
			case losscfg.AggSeqMeanTokenMean:
				if ni > 0 {
					w[i][t] = mk / ni
				}
			default:
				panic("ppoRef: aggregation " + string(cfg.Aggregation))
			}
		}
	}
	if cfg.Aggregation == losscfg.AggSeqMeanTokenMean {
		for i := range w {
			for t := range w[i] {
				w[i][t] /= math.Max(present, 1)
			}
		}
	}
	tm := func(x float64, mk float64) float64 { return x * mk / math.Max(n, 1) } // token-mean contribution
	m = map[string]float64{"tokens": n}
	gLogp, gV = make([][]float64, rows), make([][]float64, rows)
	var pg, vf, ent, kl float64
	for i := range c.mask {
		gLogp[i], gV[i] = make([]float64, len(c.mask[i])), make([]float64, len(c.mask[i]))
		for t, mk := range c.mask[i] {
			a := c.adv[i][t]
			lr := math.Max(-20, math.Min(20, c.logp[i][t]-c.old[i][t]))
			r := math.Exp(lr)
			cr := math.Max(1-cfg.ClipLow, math.Min(1+cfg.ClipHigh, r))
			unc, clp := -a*r, -a*cr
			pgT := math.Max(unc, clp)
			gPg := 0.0
			if unc >= clp { // the unclipped term is active (ties go to it)
				gPg = -a * r
			}
			pg += w[i][t] * pgT
			gLogp[i][t] = w[i][t] * gPg
			if cfg.KLBeta > 0 {
				x := math.Max(-20, math.Min(20, c.logp[i][t]-c.ref[i][t]))
				k3 := math.Exp(-x) - 1 + x
				pg += w[i][t] * cfg.KLBeta * k3
				gLogp[i][t] += w[i][t] * cfg.KLBeta * (1 - math.Exp(-x))
				kl += tm(k3, mk)
			}
			v, ov, ret := c.values[i][t], c.oldV[i][t], c.ret[i][t]
			u := (v - ret) * (v - ret)
			vc := v
			if cfg.ValueClip > 0 {
				vc = ov + math.Max(-cfg.ValueClip, math.Min(cfg.ValueClip, v-ov))
			}
			cs := (vc - ret) * (vc - ret)
			vf += w[i][t] * 0.5 * math.Max(u, cs)
			if u >= cs {
				gV[i][t] = w[i][t] * cfg.ValueCoef * (v - ret)
			}
			ent += w[i][t] * c.ent[i][t]
			if cs > u {
				m["value_clip_frac"] += tm(1, mk)
			}
			if a < 0 && r < 1-cfg.ClipLow {
				m["clip_frac_low"] += tm(1, mk)
			}
			if a > 0 && r > 1+cfg.ClipHigh {
				m["clip_frac_high"] += tm(1, mk)
			}
			m["approx_kl"] += tm(r-1-lr, mk)
			m["ratio_mean"] += tm(r, mk)
			m["value_mean"] += tm(v, mk)
		}
	}
	// pg above holds Agg(pg + β·KL); report the surrogate alone as pg_loss.
	m["pg_loss"] = pg
	if cfg.KLBeta > 0 {
		m["kl"] = kl
		var klAgg float64
		for i := range c.mask {
			for t := range c.mask[i] {
				x := math.Max(-20, math.Min(20, c.logp[i][t]-c.ref[i][t]))
				klAgg += w[i][t] * (math.Exp(-x) - 1 + x)
			}
		}
		m["pg_loss"] = pg - cfg.KLBeta*klAgg
	}
	m["value_loss"], m["entropy"] = vf, ent
	m["clip_frac"] = m["clip_frac_low"] + m["clip_frac_high"]
	// runPPOLoss gives π_old as the behaviour log-probs: no mismatch, over every counted token.
	m[loss.MismatchPrefix+loss.MismatchTokens] = n
	l = pg + cfg.ValueCoef*vf - cfg.EntropyCoef*ent
	return l, m, gLogp, gV
}

func mat(x [][]float64) *tensors.Tensor {
	f := make([]float32, 0, len(x)*len(x[0]))
	for _, r := range x {
		for _, v := range r {
			f = append(f, float32(v))
		}
	}
	return tensors.FromFlatDataAndDimensions(f, len(x), len(x[0]))
}

// runPPOLoss evaluates PPOLoss, its metrics and its gradients with respect to logp and values.
func runPPOLoss(t *testing.T, cfg losscfg.PolicyConfig, c ppoCase) (float64, map[string]float64, [][]float64, [][]float64) {
	t.Helper()
	rows, seq := len(c.mask), len(c.mask[0])
	ref := c.ref
	if ref == nil {
		ref = c.old
	}
	outs := MustExecOnceN(testbackend.Sequential(), func(in []*Node) []*Node {
		l, m := PPOLoss(cfg, loss.PolicyInputs{Logp: in[0], OldLogp: in[1], Advantages: in[2], Mask: in[3], Values: in[4],
			OldValues: in[5], Returns: in[6], Entropy: in[7], RefLogp: in[8], BehaviourLogp: in[1]})
		g := Gradient(l, in[0], in[4])
		nodes := []*Node{l, g[0], g[1]}
		for _, k := range PPOMetrics {
			x, ok := m[k]
			if !ok {
				x = ScalarZero(l.Graph(), l.DType())
			}
			nodes = append(nodes, x)
		}
		return nodes
	}, mat(c.logp), mat(c.old), mat(c.adv), mat(c.mask), mat(c.values), mat(c.oldV), mat(c.ret), mat(c.ent), mat(ref))
	m := map[string]float64{}
	for i, k := range PPOMetrics {
		m[k] = float64(tensors.ToScalar[float32](outs[3+i]))
	}
	grad := func(x *tensors.Tensor) [][]float64 {
		f := tensors.MustCopyFlatData[float32](x)
		out := make([][]float64, rows)
		for i := range out {
			out[i] = make([]float64, seq)
			for j := range seq {
				out[i][j] = float64(f[i*seq+j])
			}
		}
		return out
	}
	return float64(tensors.ToScalar[float32](outs[0])), m, grad(outs[1]), grad(outs[2])
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 2e-5*math.Max(1, math.Abs(b)) }

// TestPPOLossTable: PPOLoss, its metrics and its gradients match the plain-Go reference on small
// cases that exercise every branch: on-policy, ratios clipped on both sides, value clipping active
// and inactive, entropy bonus, KL to the reference, value_coef 0 (the value loss is still reported
// but carries no gradient), seq-mean-token-mean aggregation and a masked padding column. The first
// case is also checked against numbers worked out by hand.
func TestPPOLossTable(t *testing.T) {
	ppo := losscfg.DefaultPolicyConfig(losscfg.AlgoPPO)
	with := func(f func(*losscfg.PolicyConfig)) losscfg.PolicyConfig { c := ppo; f(&c); return c }
	// Hand case: on-policy (r = 1), A = (+1, −1): pg = (−1 + 1)/2 = 0. V = (0.5, 0), R = (1, 0), V_old = V:
	// vf = ½·(0.25 + 0)/2 = 0.0625, no value clipping. H = (1, 2) → 1.5.
	// loss = 0 + 0.5·0.0625 − 0.01·1.5 = 0.01625.
	hand := ppoCase{
		logp: [][]float64{{-1, -2}}, old: [][]float64{{-1, -2}}, adv: [][]float64{{1, -1}}, mask: [][]float64{{1, 1}},
		values: [][]float64{{0.5, 0}}, oldV: [][]float64{{0.5, 0}}, ret: [][]float64{{1, 0}}, ent: [][]float64{{1, 2}},
	}
	// Off-policy case: row 0 token 0 has r = e^0.5 > 1.2 with A > 0 (clipped high), token 1 r = e^−0.5 < 0.8
	// with A < 0 (clipped low), token 2 r = e^0.1 inside; row 1 has a padding column. The values moved
	// from V_old by more than ε_v on some tokens, in both directions.
	off := ppoCase{
		logp:   [][]float64{{-0.5, -2.5, -1.1}, {-0.3, -0.7, -4}},
		old:    [][]float64{{-1.0, -2.0, -1.2}, {-0.4, -0.2, -4}},
		adv:    [][]float64{{1.5, -0.8, 0.3}, {-1.2, 2.0, 9}},
		mask:   [][]float64{{1, 1, 1}, {1, 1, 0}},
		values: [][]float64{{0.9, -0.4, 0.1}, {0.35, 1.0, 7}},
		oldV:   [][]float64{{0.2, 0.0, 0.05}, {0.3, 0.5, 0}},
		ret:    [][]float64{{1.0, 0.5, -0.2}, {0.1, 1.2, 3}},
		ent:    [][]float64{{0.7, 1.3, 0.2}, {2.1, 0.4, 5}},
		ref:    [][]float64{{-0.8, -2.2, -1.0}, {-0.5, -0.3, -4}},
	}
	cases := []struct {
		name string
		cfg  losscfg.PolicyConfig
		c    ppoCase
	}{
		{"hand", with(func(c *losscfg.PolicyConfig) { c.EntropyCoef = 0.01 }), hand},
		{"defaults off-policy", ppo, off},
		{"entropy and kl", with(func(c *losscfg.PolicyConfig) { c.EntropyCoef, c.KLBeta = 0.05, 0.1 }), off},
		{"unclipped critic", with(func(c *losscfg.PolicyConfig) { c.ValueClip = 0 }), off},
		{"value_coef 0", with(func(c *losscfg.PolicyConfig) { c.ValueCoef = 0 }), off},
		{"clip-higher", with(func(c *losscfg.PolicyConfig) { c.ClipLow, c.ClipHigh = 0.1, 0.6 }), off},
		{"seq-mean-token-mean", with(func(c *losscfg.PolicyConfig) { c.Aggregation = losscfg.AggSeqMeanTokenMean; c.ValueCoef = 1 }), off},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, gm, gl, gv := runPPOLoss(t, tc.cfg, tc.c)
			want, wm, wl, wv := ppoRef(tc.cfg, tc.c)
			if !closeTo(got, want) {
				t.Errorf("loss %.7f, reference %.7f", got, want)
			}
			for _, k := range PPOMetrics {
				if k == "tis_truncated_frac" {
					continue
				}
				if !closeTo(gm[k], wm[k]) {
					t.Errorf("%s = %.7f, reference %.7f", k, gm[k], wm[k])
				}
			}
			for i := range wl {
				for j := range wl[i] {
					if !closeTo(gl[i][j], wl[i][j]) || !closeTo(gv[i][j], wv[i][j]) {
						t.Errorf("gradient at [%d,%d]: d/dlogp %.6f (ref %.6f), d/dV %.6f (ref %.6f)", i, j, gl[i][j], wl[i][j], gv[i][j], wv[i][j])
					}
				}
			}
		})
	}
	// The hand numbers themselves, so the reference is checked too.
	l, m, _, gv := runPPOLoss(t, cases[0].cfg, hand)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"loss", l, 0.01625}, {"pg_loss", m["pg_loss"], 0}, {"value_loss", m["value_loss"], 0.0625}, {"entropy", m["entropy"], 1.5},
		{"clip_frac", m["clip_frac"], 0}, {"ratio_mean", m["ratio_mean"], 1}, {"value_mean", m["value_mean"], 0.25},
		{"tokens", m["tokens"], 2}, {"dV[0]", gv[0][0], 0.5 * (0.5 - 1) / 2}} {
		if !closeTo(c.got, c.want) {
			t.Errorf("hand case %s = %.7f, want %.7f", c.name, c.got, c.want)
		}
	}
	// The clipped branches really were exercised by the off-policy case.
	_, m, _, _ = runPPOLoss(t, ppo, off)
	if m["clip_frac_low"] == 0 || m["clip_frac_high"] == 0 || m["value_clip_frac"] == 0 {
		t.Errorf("off-policy case should clip both sides and the critic: %v", m)
	}
}

// TestPPOLossRejects: a non-ppo config and sequence-level advantages panic (the runtime turns a panic
// into an error).
func TestPPOLossRejects(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     losscfg.PolicyConfig
		advRank int
		want    string
	}{
		{"grpo config", losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO), 2, "want \"ppo\""},
		{"row advantages", losscfg.DefaultPolicyConfig(losscfg.AlgoPPO), 1, "adv has shape"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Build only (no execution): the panic happens while the graph is built.
			g := NewGraph(testbackend.Sequential(), "ppo-rejects")
			defer g.Finalize()
			var msg string
			func() {
				defer func() { msg = fmt.Sprint(recover()) }()
				x := Const(g, [][]float32{{-1, -2}})
				mask := Const(g, [][]float32{{1, 1}})
				adv := mask
				if c.advRank == 1 {
					adv = ReduceSum(adv, 1)
				}
				PPOLoss(c.cfg, loss.PolicyInputs{Logp: x, OldLogp: x, Advantages: adv, Mask: mask,
					Values: x, OldValues: x, Returns: x, Entropy: x})
			}()
			if !strings.Contains(msg, c.want) {
				t.Fatalf("panic %q, want one containing %q", msg, c.want)
			}
		})
	}
}

// ppoToy is a one-row batch of the toy model: prompt 3 tokens, completion 2 tokens, of which the
// first is counted (one counted token makes "its log-prob goes up" a first-order certainty).
func ppoToy() (tok, tgt, pos [][]int, valid [][]bool, mask [][]float32) {
	full := []int{1, 5, 9, 12, 20, 3}
	seq := 8
	tok, tgt, pos = [][]int{make([]int, seq)}, [][]int{make([]int, seq)}, [][]int{make([]int, seq)}
	valid, mask = [][]bool{make([]bool, seq)}, [][]float32{make([]float32, seq)}
	for t := range seq {
		pos[0][t] = t
		if t+1 < len(full) {
			tok[0][t], tgt[0][t], valid[0][t] = full[t], full[t+1], true
		}
	}
	mask[0][2] = 1 // target full[3] = 12, sampled in state full[:3]
	return
}

// TestPPOStepSigns: one Adam step of the full PPO objective on a toy model with a value head moves the
// right way: a positive-advantage token's log-prob goes up and a negative one's goes down (critic off,
// value_coef 0), and the value at a token moves toward its return from either side (advantages 0, so
// only the critic learns).
func TestPPOStepSigns(t *testing.T) {
	cfg := toyCfg
	cfg.ValueHead = true
	tok, tgt, pos, valid, mask := ppoToy()
	const lt = 2 // the counted position
	for _, c := range []struct {
		name      string
		adv, dRet float64 // advantage of the counted token; return − V_old there
		valueCoef float64
		wantLogp  float64 // sign of the change of logp at lt (0: not checked)
		wantV     float64 // sign of the change of V at lt (0: not checked)
	}{
		{"positive advantage", 1, 0, 0, +1, 0},
		{"negative advantage", -1, 0, 0, -1, 0},
		{"return above value", 0, 1, 1, 0, +1},
		{"return below value", 0, -1, 1, 0, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := gm.NewStore()
			if err := model.InitWeights(store.RootScope(), cfg, 7, 0.02); err != nil {
				t.Fatal(err)
			}
			probe, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, x []*Node) []*Node {
				h := model.Hidden(scope, cfg, x[0], x[2], x[3])
				return []*Node{model.TokenLogProbs(model.LMHead(scope, cfg, h), x[1]), model.ValueHead(scope, cfg, h)}
			})
			if err != nil {
				t.Fatal(err)
			}
			read := func() (logp, v [][]float32) {
				out, err := probe.Call(i32(tok), i32(tgt), i32(pos), bools(valid))
				if err != nil {
					t.Fatal(err)
				}
				lp, vv := tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1])
				return [][]float32{lp}, [][]float32{vv}
			}
			old, oldV := read()
			adv := [][]float32{make([]float32, len(mask[0]))}
			ret := [][]float32{append([]float32(nil), oldV[0]...)}
			adv[0][lt] = float32(c.adv)
			ret[0][lt] += float32(c.dRet)
			pc := losscfg.DefaultPolicyConfig(losscfg.AlgoPPO)
			pc.ValueCoef = c.valueCoef
			obj := PPO(pc)
			opt := optimizer.Adam().LearningRate(1e-3).Done()
			step, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, x []*Node) []*Node {
				l, m := obj.Build(scope, cfg, x)
				opt.UpdateGraph(scope, l.Graph(), l)
				return []*Node{l, m["value_loss"], m["tokens"]}
			})
			if err != nil {
				t.Fatal(err)
			}
			b := PPOBatch{PolicyRows: PolicyRows{Tokens: tok, Targets: tgt, Positions: pos, Valid: valid, Mask: mask, Old: old, Behaviour: old, Ref: old},
				Adv: adv, OldValues: oldV, Returns: ret}
			var args []any
			for _, x := range b.Tensors() {
				args = append(args, x)
			}
			out, err := step.Call(args...)
			if err != nil {
				t.Fatal(err)
			}
			if n := tensors.ToScalar[float32](out[2]); n != 1 {
				t.Fatalf("tokens = %g, want 1", n)
			}
			if vl, want := tensors.ToScalar[float32](out[1]), 0.5*c.dRet*c.dRet; !closeTo(float64(vl), want) {
				t.Fatalf("value_loss before the step = %g, want %g", vl, want)
			}
			newLogp, newV := read()
			dl, dv := float64(newLogp[0][lt]-old[0][lt]), float64(newV[0][lt]-oldV[0][lt])
			t.Logf("Δlogp %+.5f, ΔV %+.5f", dl, dv)
			if c.wantLogp != 0 && !(dl*c.wantLogp > 0) {
				t.Errorf("log-prob of the counted token moved by %+g, want sign %+g", dl, c.wantLogp)
			}
			if c.wantV != 0 && !(dv*c.wantV > 0) {
				t.Errorf("value moved by %+g, want sign %+g (toward the return)", dv, c.wantV)
			}
		})
	}
}
