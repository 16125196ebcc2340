package loss

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// ---- plain-Go references ----

func pgRefClip(x, lo, hi float64) float64 { return math.Min(math.Max(x, lo), hi) }

// pgRefClipLoss is −min(r·A, clip(r)·A), capped at −c·A for A < 0 when c > 0.
func pgRefClipLoss(r, a, el, eh, c float64) float64 {
	l := math.Max(-a*r, -a*pgRefClip(r, 1-el, 1+eh))
	if c > 0 && a < 0 {
		l = math.Min(l, -a*c)
	}
	return l
}

// pgRefClipGrad is d pgRefClipLoss(exp(logp − old)) / d logp: −A·r where the unclipped term is active, else 0.
func pgRefClipGrad(r, a, el, eh, c float64) float64 {
	unclipped, clipped := -a*r, -a*pgRefClip(r, 1-el, 1+eh)
	if c > 0 && a < 0 && -a*c < math.Max(unclipped, clipped) {
		return 0
	}
	if unclipped >= clipped {
		return -a * r
	}
	return 0
}

func pgRefKL(x float64, est losscfg.KLEstimator) float64 {
	switch est {
	case losscfg.KLK1:
		return x
	case losscfg.KLK2:
		return 0.5 * x * x
	case losscfg.KLK3:
		x = pgRefClip(x, -20, 20)
		return math.Exp(-x) - 1 + x
	}
	panic(est)
}

func pgRefValueLoss(v, old, ret, eps float64) (loss float64, clipped bool) {
	u := (v - ret) * (v - ret)
	if eps <= 0 {
		return 0.5 * u, false
	}
	vc := old + pgRefClip(v-old, -eps, eps)
	c := (vc - ret) * (vc - ret)
	return 0.5 * math.Max(u, c), c > u
}

// pgTokenAdv broadcasts [batch] advantages (given as a 1-row matrix) or returns [batch, seq] ones.
func pgTokenAdv(adv any, batch, seq int) [][]float64 {
	out := make([][]float64, batch)
	for i := range out {
		out[i] = make([]float64, seq)
		for t := range out[i] {
			switch a := adv.(type) {
			case []float32:
				out[i][t] = float64(a[i])
			case [][]float32:
				out[i][t] = float64(a[i][t])
			}
		}
	}
	return out
}

// pgRefSeqMean is the masked mean of row i of x (0 for an empty row).
func pgRefSeqMean(x, mask [][]float64, i int) float64 {
	s, n := 0.0, 0.0
	for t := range x[i] {
		s += x[i][t] * mask[i][t]
		n += mask[i][t]
	}
	return s / math.Max(n, 1)
}

// pgRefRowMean is the mean over non-empty rows of per-row masked means of x.
func pgRefRowMean(x, mask [][]float64) float64 {
	return pgRefAggregate(x, mask, losscfg.AggSeqMeanTokenMean, 0)
}

func pgMap(batch, seq int, fn func(i, t int) float64) [][]float64 {
	out := make([][]float64, batch)
	for i := range out {
		out[i] = make([]float64, seq)
		for t := range out[i] {
			out[i][t] = fn(i, t)
		}
	}
	return out
}

// ---- shared data: 3 rows, 4 tokens, padding filled with junk that must not leak ----

var (
	pgMask   = [][]float32{{1, 1, 1, 0}, {1, 1, 0, 0}, {1, 1, 1, 1}}
	pgLogp   = [][]float32{{-1.0, -0.5, -2.0, 9}, {-0.3, -1.2, 9, 9}, {-0.7, -0.1, -1.5, -0.05}}
	pgOld    = [][]float32{{-1.1, -0.5, -1.6, -9}, {-0.3, -0.9, -9, 3}, {-0.9, -0.1, -1.0, -0.5}}
	pgBeh    = [][]float32{{-1.0, -1.5, -1.7, 0}, {-0.4, -0.9, 0, 0}, {-0.8, -0.2, -0.4, -0.6}}
	pgRef    = [][]float32{{-1.3, -0.4, -2.2, 0}, {-0.2, -1.0, 0, 0}, {-0.6, -0.3, -1.1, -0.2}}
	pgAdvSeq = []float32{1.5, -0.8, 0.3}
	pgAdvTok = [][]float32{{1.5, 1.0, -0.5, 7}, {-0.8, 0.2, 7, 7}, {0.3, -0.3, 0.9, -1.2}}
	pgEnt    = [][]float32{{0.9, 1.2, 0.3, 5}, {2.0, 0.1, 5, 5}, {0.4, 0.6, 0.8, 1.0}}
	pgVal    = [][]float32{{0.1, 0.3, 0.5, 9}, {-0.2, 0.4, 9, 9}, {0.0, 0.2, 0.6, 0.9}}
	pgOldVal = [][]float32{{0.0, 0.55, 0.45, 0}, {-0.1, 0.1, 0, 0}, {0.1, 0.2, 0.3, 0.95}}
	pgRet    = [][]float32{{1, 1, 1, 0}, {0, 0, 0, 0}, {0.5, 0.5, 1.0, 0.5}}
)

// ---- ClippedSurrogate ----

func TestClippedSurrogateHandComputed(t *testing.T) {
	cases := []struct {
		name                 string
		ratio, adv           float64
		epsLow, epsHigh, dua float64
		want, wantGrad       float64
	}{
		{"ratio 1 → −A", 1, 2, 0.2, 0.2, 0, -2, -2},
		{"ratio 1, A<0 → −A", 1, -0.5, 0.2, 0.2, 0, 0.5, 0.5},
		{"at 1+ε, A>0", 1.2, 1, 0.2, 0.2, 0, -1.2, math.NaN()},
		{"at 1−ε, A<0", 0.8, -1, 0.2, 0.2, 0, 0.8, math.NaN()},
		{"above 1+ε, A>0: clipped", 1.5, 1, 0.2, 0.2, 0, -1.2, 0},
		{"above 1+ε, A<0: pessimistic, unclipped", 1.5, -1, 0.2, 0.2, 0, 1.5, 1.5},
		{"below 1−ε, A>0: unclipped", 0.5, 1, 0.2, 0.2, 0, -0.5, -0.5},
		{"below 1−ε, A<0: clipped", 0.5, -1, 0.2, 0.2, 0, 0.8, 0},
		{"clip-higher 1.25 < 1.28: unclipped", 1.25, 1, 0.2, 0.28, 0, -1.25, -1.25},
		{"clip-higher 1.3 > 1.28: clipped", 1.3, 1, 0.2, 0.28, 0, -1.28, 0},
		{"dual clip: r=4 > c=3, A<0", 4, -1, 0.2, 0.2, 3, 3, 0},
		{"dual clip: r=2 < c=3, A<0", 2, -1, 0.2, 0.2, 3, 2, 2},
		{"dual clip ignores A>0", 4, 1, 0.2, 0.2, 3, -1.2, 0},
		{"A = 0", 1.7, 0, 0.2, 0.2, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logp := [][]float32{{float32(math.Log(c.ratio))}}
			old := [][]float32{{0}}
			out := pgExec(t, func(in []*Node) []*Node {
				l, _ := ClippedSurrogate(in[0], in[1], in[2], in[3], c.epsLow, c.epsHigh, c.dua)
				return []*Node{l, Gradient(ReduceAllSum(l), in[0])[0]}
			}, logp, old, []float32{float32(c.adv)}, [][]float32{{1}})
			pgCheckScalar(t, "loss", out[0][0], c.want)
			pgCheckScalar(t, "ref", float32(pgRefClipLoss(float64(float32(c.ratio)), c.adv, c.epsLow, c.epsHigh, c.dua)), c.want)
			if !math.IsNaN(c.wantGrad) {
				pgCheckScalar(t, "dloss/dlogp", out[1][0], c.wantGrad)
			}
		})
	}
}

// TestClippedSurrogateGradientSign: with a positive advantage the loss falls as logp rises inside the
// clip range (negative gradient) and has no gradient once clipped; mirrored for a negative one.
func TestClippedSurrogateGradientSign(t *testing.T) {
	ratios := []float64{0.5, 0.7, 0.9, 1.0, 1.1, 1.3, 2.0}
	for _, a := range []float64{1, -1} {
		logp := [][]float32{make([]float32, len(ratios))}
		for i, r := range ratios {
			logp[0][i] = float32(math.Log(r))
		}
		zeros := [][]float32{make([]float32, len(ratios))}
		ones := [][]float32{slices.Repeat([]float32{1}, len(ratios))}
		grad := pgExec(t, func(in []*Node) []*Node {
			l, _ := ClippedSurrogate(in[0], in[1], in[2], in[3], 0.2, 0.2, 0)
			return Gradient(ReduceAllSum(l), in[0])
		}, logp, zeros, []float32{float32(a)}, ones)[0]
		for i, r := range ratios {
			inside := r > 0.8 && r < 1.2
			clipped := (a > 0 && r > 1.2) || (a < 0 && r < 0.8)
			switch {
			case inside && a > 0 && !(grad[i] < 0):
				t.Errorf("A=%g r=%g: grad %g, want < 0", a, r, grad[i])
			case inside && a < 0 && !(grad[i] > 0):
				t.Errorf("A=%g r=%g: grad %g, want > 0", a, r, grad[i])
			case clipped && grad[i] != 0:
				t.Errorf("A=%g r=%g (clipped): grad %g, want 0", a, r, grad[i])
			}
			if want := pgRefClipGrad(float64(float32(r)), a, 0.2, 0.2, 0); !pgClose(grad[i], want) {
				t.Errorf("A=%g r=%g: grad %g, want %g", a, r, grad[i], want)
			}
		}
	}
}

func TestClippedSurrogateMatchesReference(t *testing.T) {
	logp, old, mask := pgF64(pgLogp), pgF64(pgOld), pgF64(pgMask)
	for _, adv := range []any{pgAdvSeq, pgAdvTok} {
		a := pgTokenAdv(adv, 3, 4)
		for _, e := range [][3]float64{{0.2, 0.2, 0}, {0.2, 0.28, 0}, {0.1, 0.1, 1.5}, {0.3, 0.5, 3}} {
			name := fmt.Sprintf("adv%T/eps%v", adv, e)
			out, keys := surrogateExec(t, losscfg.AggTokenMean, func(logp, old, adv, mask *Node) (*Node, map[string]*Node) {
				return ClippedSurrogate(logp, old, adv, mask, e[0], e[1], e[2])
			}, pgLogp, pgOld, adv, pgMask)
			ratio := pgMap(3, 4, func(i, t int) float64 { return math.Exp(pgRefClip(logp[i][t]-old[i][t], -20, 20)) })
			wantLoss := pgMap(3, 4, func(i, t int) float64 { return pgRefClipLoss(ratio[i][t], a[i][t], e[0], e[1], e[2]) })
			n := 9.0 // counted tokens
			wantGrad := pgMap(3, 4, func(i, t int) float64 {
				return mask[i][t] / n * pgRefClipGrad(ratio[i][t], a[i][t], e[0], e[1], e[2])
			})
			pgCheckMatrix(t, name+"/loss", out[0], wantLoss)
			pgCheckMatrix(t, name+"/grad", out[1], wantGrad)
			ind := func(f func(r, a float64) bool) float64 {
				return pgRefAggregate(pgMap(3, 4, func(i, t int) float64 {
					if f(ratio[i][t], a[i][t]) {
						return 1
					}
					return 0
				}), mask, losscfg.AggTokenMean, 0)
			}
			wantM := map[string]float64{
				"approx_kl": pgRefAggregate(pgMap(3, 4, func(i, t int) float64 {
					return ratio[i][t] - 1 - math.Log(ratio[i][t])
				}), mask, losscfg.AggTokenMean, 0),
				"ratio_mean":     pgRefAggregate(ratio, mask, losscfg.AggTokenMean, 0),
				"clip_frac_low":  ind(func(r, a float64) bool { return a < 0 && r < 1-e[0] }),
				"clip_frac_high": ind(func(r, a float64) bool { return a > 0 && r > 1+e[1] }),
			}
			if e[2] > 0 {
				wantM["clip_frac_dual"] = ind(func(r, a float64) bool { return a < 0 && r > e[2] })
			}
			pgCheckMetrics(t, name, keys, out[2:], wantM)
		}
	}
}

func pgSortedKeys(m Metrics) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pgCheckMetrics compares graph metrics (keys, values in the same order) with want; every wanted key must
// be present and every present key must be wanted.
func pgCheckMetrics(t *testing.T, name string, keys []string, got [][]float32, want map[string]float64) {
	t.Helper()
	for i, k := range keys {
		w, ok := want[k]
		if !ok {
			t.Errorf("%s: unexpected metric %q = %g", name, k, got[i][0])
			continue
		}
		if !pgClose(got[i][0], w) {
			t.Errorf("%s: metric %s = %.7g, want %.7g", name, k, got[i][0], w)
		}
	}
	for k := range want {
		if !slices.Contains(keys, k) {
			t.Errorf("%s: metric %q missing", name, k)
		}
	}
}

// ---- PolicyConfig and PolicyLoss ----

func TestDefaultPolicyConfigs(t *testing.T) {
	want := map[string]struct {
		low, high, beta float64
		agg             losscfg.AggMode
	}{
		losscfg.AlgoGRPO:        {0.2, 0.2, 0.04, losscfg.AggSeqMeanTokenMean},
		losscfg.AlgoDrGRPO:      {0.2, 0.2, 0, losscfg.AggSeqMeanTokenSumNorm},
		losscfg.AlgoDAPO:        {0.2, 0.28, 0, losscfg.AggTokenMean},
		losscfg.AlgoGSPO:        {3e-4, 4e-4, 0, losscfg.AggSeqMeanTokenMean},
		losscfg.AlgoRLOO:        {0.2, 0.2, 0, losscfg.AggSeqMeanTokenSum},
		losscfg.AlgoReinforcePP: {0.2, 0.2, 0, losscfg.AggTokenMean},
		losscfg.AlgoPPO:         {0.2, 0.2, 0, losscfg.AggTokenMean},
		losscfg.AlgoCISPO:       {1, 3, 0, losscfg.AggTokenMean},
	}
	for _, algo := range losscfg.Algorithms {
		c := losscfg.DefaultPolicyConfig(algo)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", algo, err)
		}
		w := want[algo]
		if c.ClipLow != w.low || c.ClipHigh != w.high || c.KLBeta != w.beta || c.Aggregation != w.agg || c.KLEstimator != "k3" {
			t.Errorf("%s: defaults %+v, want %+v", algo, c, w)
		}
	}
	if c := losscfg.DefaultPolicyConfig(losscfg.AlgoPPO); c.ValueCoef != 0.5 || c.ValueClip != 0.2 {
		t.Errorf("ppo value defaults %+v", c)
	}
	if err := losscfg.DefaultPolicyConfig("a2c").Validate(); err == nil || !strings.Contains(err.Error(), "algorithm") {
		t.Errorf("unknown algorithm: %v", err)
	}
}

func TestPolicyConfigValidate(t *testing.T) {
	cases := []struct {
		field string
		edit  func(c *losscfg.PolicyConfig)
		want  string // substring of the error
	}{
		{"algorithm", func(c *losscfg.PolicyConfig) { c.Algorithm = "GRPO" }, `"grpo"`},
		{"clip_low", func(c *losscfg.PolicyConfig) { c.ClipLow = -0.1 }, "[0, 1)"},
		{"clip_low", func(c *losscfg.PolicyConfig) { c.ClipLow = 1 }, "[0, 1)"},
		{"clip_high", func(c *losscfg.PolicyConfig) { c.ClipHigh = math.NaN() }, "≥ 0"},
		{"dual_clip", func(c *losscfg.PolicyConfig) { c.DualClip = 1.1 }, "> 1+clip_high"},
		{"kl_beta", func(c *losscfg.PolicyConfig) { c.KLBeta = -1 }, "≥ 0"},
		{"kl_estimator", func(c *losscfg.PolicyConfig) { c.KLEstimator = "k4" }, `"k3"`},
		{"aggregation", func(c *losscfg.PolicyConfig) { c.Aggregation = "mean" }, `"token-mean"`},
		{"max_len", func(c *losscfg.PolicyConfig) { c.MaxLen = -1 }, "≥ 0"},
		{"tis_threshold", func(c *losscfg.PolicyConfig) { c.TISThreshold = 0.5 }, "≥ 1"},
		{"entropy_coef", func(c *losscfg.PolicyConfig) { c.EntropyCoef = math.Inf(1) }, "finite"},
		{"value_coef", func(c *losscfg.PolicyConfig) { c.ValueCoef = -0.5 }, "≥ 0"},
		{"value_clip", func(c *losscfg.PolicyConfig) { c.ValueClip = -0.2 }, "≥ 0"},
	}
	for _, c := range cases {
		cfg := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field+"=") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to name %s= and say %q", c.field, err, c.field, c.want)
		}
	}
	ok := losscfg.DefaultPolicyConfig(losscfg.AlgoDAPO)
	ok.DualClip, ok.TISThreshold, ok.EntropyCoef, ok.MaxLen = 3, 2, -0.01, 4096
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

// pgRefPolicyLoss is the plain-Go reference of PolicyLoss on the shared data, BehaviourLogp given:
// the loss, its metrics and its analytic gradient with respect to logp.
func pgRefPolicyLoss(cfg losscfg.PolicyConfig, adv any) (float64, map[string]float64, [][]float64) {
	logp, old, beh, ref, mask := pgF64(pgLogp), pgF64(pgOld), pgF64(pgBeh), pgF64(pgRef), pgF64(pgMask)
	ent, val, oldVal, ret := pgF64(pgEnt), pgF64(pgVal), pgF64(pgOldVal), pgF64(pgRet)
	a := pgTokenAdv(adv, 3, 4)
	corr := refCorrection(old, beh, mask, cfg.EffectiveCorrection())
	keep := corr.keep // every term is aggregated under the correction's mask
	agg := func(x [][]float64) float64 { return pgRefAggregate(x, keep, cfg.Aggregation, cfg.MaxLen) }
	coef := pgRefAggCoef(keep, cfg.Aggregation, cfg.MaxLen)
	tokMean := func(x [][]float64) float64 { return pgRefAggregate(x, keep, losscfg.AggTokenMean, 0) }
	m := map[string]float64{}
	ratio := pgMap(3, 4, func(i, t int) float64 { return math.Exp(pgRefClip(logp[i][t]-old[i][t], -20, 20)) })
	m["approx_kl"] = tokMean(pgMap(3, 4, func(i, t int) float64 { return ratio[i][t] - 1 - math.Log(ratio[i][t]) }))
	var pg, dpg [][]float64 // per-token surrogate and its derivative with respect to logp
	switch cfg.Algorithm {
	case losscfg.AlgoGSPO:
		lr := pgMap(3, 4, func(i, t int) float64 { return logp[i][t] - old[i][t] })
		s := pgMap(3, 4, func(i, t int) float64 { return math.Exp(math.Min(pgRefSeqMean(lr, keep, i), 10)) })
		pg = pgMap(3, 4, func(i, t int) float64 { return pgRefClipLoss(s[i][t], a[i][t], cfg.ClipLow, cfg.ClipHigh, 0) })
		dpg = pgMap(3, 4, func(i, t int) float64 { return pgRefClipGrad(s[i][t], a[i][t], cfg.ClipLow, cfg.ClipHigh, 0) })
		rowMean := func(x [][]float64) float64 { return pgRefAggregate(x, keep, losscfg.AggSeqMeanTokenMean, 0) }
		m["ratio_mean"] = rowMean(s)
		m["clip_frac_low"] = rowMean(pgMap(3, 4, func(i, t int) float64 { return b01(a[i][t] < 0 && s[i][t] < 1-cfg.ClipLow) }))
		m["clip_frac_high"] = rowMean(pgMap(3, 4, func(i, t int) float64 { return b01(a[i][t] > 0 && s[i][t] > 1+cfg.ClipHigh) }))
	case losscfg.AlgoCISPO:
		pg = pgMap(3, 4, func(i, t int) float64 {
			l, _ := cispoRef(logp[i][t], old[i][t], a[i][t], cfg.ClipLow, cfg.ClipHigh)
			return l
		})
		dpg = pgMap(3, 4, func(i, t int) float64 {
			_, g := cispoRef(logp[i][t], old[i][t], a[i][t], cfg.ClipLow, cfg.ClipHigh)
			return g
		})
		m["ratio_mean"] = tokMean(ratio)
		m["clip_frac_low"] = tokMean(pgMap(3, 4, func(i, t int) float64 { return b01(ratio[i][t] < 1-cfg.ClipLow) }))
		m["clip_frac_high"] = tokMean(pgMap(3, 4, func(i, t int) float64 { return b01(ratio[i][t] > 1+cfg.ClipHigh) }))
	default:
		pg = pgMap(3, 4, func(i, t int) float64 {
			return pgRefClipLoss(ratio[i][t], a[i][t], cfg.ClipLow, cfg.ClipHigh, cfg.DualClip)
		})
		dpg = pgMap(3, 4, func(i, t int) float64 {
			return pgRefClipGrad(ratio[i][t], a[i][t], cfg.ClipLow, cfg.ClipHigh, cfg.DualClip)
		})
		m["ratio_mean"] = tokMean(ratio)
		m["clip_frac_low"] = tokMean(pgMap(3, 4, func(i, t int) float64 { return b01(a[i][t] < 0 && ratio[i][t] < 1-cfg.ClipLow) }))
		m["clip_frac_high"] = tokMean(pgMap(3, 4, func(i, t int) float64 { return b01(a[i][t] > 0 && ratio[i][t] > 1+cfg.ClipHigh) }))
		if cfg.DualClip > 0 {
			m["clip_frac_dual"] = tokMean(pgMap(3, 4, func(i, t int) float64 { return b01(a[i][t] < 0 && ratio[i][t] > cfg.DualClip) }))
		}
	}
	pg = pgMap(3, 4, func(i, t int) float64 { return pg[i][t] * corr.w[i][t] })
	dpg = pgMap(3, 4, func(i, t int) float64 { return dpg[i][t] * corr.w[i][t] })
	for k, v := range corr.m {
		m[k] = v
	}
	m["pg_loss"] = agg(pg)
	total, dtotal := pg, dpg
	if cfg.KLBeta > 0 {
		x := pgMap(3, 4, func(i, t int) float64 { return logp[i][t] - ref[i][t] })
		kl := pgMap(3, 4, func(i, t int) float64 { return pgRefKL(x[i][t], losscfg.KLEstimator(cfg.KLEstimator)) })
		total = pgMap(3, 4, func(i, t int) float64 { return pg[i][t] + cfg.KLBeta*kl[i][t] })
		dtotal = pgMap(3, 4, func(i, t int) float64 {
			return dpg[i][t] + cfg.KLBeta*pgRefKLGrad(x[i][t], losscfg.KLEstimator(cfg.KLEstimator))
		})
		m["kl"] = tokMean(kl)
	}
	loss := agg(total)
	grad := pgMap(3, 4, func(i, t int) float64 { return coef[i][t] * dtotal[i][t] })
	if cfg.EntropyCoef != 0 {
		m["entropy"] = agg(ent)
		loss -= cfg.EntropyCoef * m["entropy"]
	}
	if cfg.ValueCoef > 0 {
		vl := pgMap(3, 4, func(i, t int) float64 {
			l, _ := pgRefValueLoss(val[i][t], oldVal[i][t], ret[i][t], cfg.ValueClip)
			return l
		})
		m["value_loss"] = agg(vl)
		m["value_clip_frac"] = tokMean(pgMap(3, 4, func(i, t int) float64 {
			_, c := pgRefValueLoss(val[i][t], oldVal[i][t], ret[i][t], cfg.ValueClip)
			return b01(c)
		}))
		loss += cfg.ValueCoef * m["value_loss"]
	}
	var mm MismatchStats
	for i := range old {
		row, err := MismatchOf(old[i], beh[i], pgBoolRow(mask[i]))
		if err != nil {
			panic(err)
		}
		mm = mm.Merge(row)
	}
	for k, v := range mm.Metrics(MismatchPrefix) {
		m[k] = v
	}
	m["loss"] = loss
	return loss, m, grad
}

// pgRefAggCoef are the coefficients c of Aggregate as a linear map, Aggregate(x) = Σ c_it·x_it, so
// that the reference's gradient is c_it·∂ℓ_it/∂logp_it.
func pgRefAggCoef(mask [][]float64, mode losscfg.AggMode, maxLen int) [][]float64 {
	if maxLen <= 0 {
		maxLen = len(mask[0])
	}
	total, rows := 0.0, 0.0
	n := make([]float64, len(mask))
	for i := range mask {
		for _, v := range mask[i] {
			n[i] += v
		}
		total += n[i]
		rows += b01(n[i] > 0)
	}
	total, rows = math.Max(total, 1), math.Max(rows, 1)
	return pgMap(len(mask), len(mask[0]), func(i, t int) float64 {
		switch mode {
		case losscfg.AggTokenMean:
			return mask[i][t] / total
		case losscfg.AggSeqMeanTokenMean:
			return mask[i][t] / (math.Max(n[i], 1) * rows)
		case losscfg.AggSeqMeanTokenSum:
			return mask[i][t] / rows
		case losscfg.AggSeqMeanTokenSumNorm:
			return mask[i][t] / (float64(maxLen) * rows)
		}
		panic(mode)
	})
}

// pgRefKLGrad is d KLPenalty/d logp for x = logp − refLogp.
func pgRefKLGrad(x float64, est losscfg.KLEstimator) float64 {
	switch est {
	case losscfg.KLK1:
		return 1
	case losscfg.KLK2:
		return x
	case losscfg.KLK3:
		if math.Abs(x) >= 20 {
			return 0
		}
		return 1 - math.Exp(-x)
	}
	panic(est)
}

func pgBoolRow(row []float64) []bool {
	out := make([]bool, len(row))
	for i, v := range row {
		out[i] = v > 0
	}
	return out
}

func pgPolicyCases() map[string]losscfg.PolicyConfig {
	cases := map[string]losscfg.PolicyConfig{}
	for _, algo := range losscfg.Algorithms {
		cases[algo] = losscfg.DefaultPolicyConfig(algo)
	}
	add := func(name string, base string, edit func(c *losscfg.PolicyConfig)) {
		c := losscfg.DefaultPolicyConfig(base)
		edit(&c)
		cases[name] = c
	}
	add("grpo-k1", losscfg.AlgoGRPO, func(c *losscfg.PolicyConfig) { c.KLEstimator = "k1" })
	add("grpo-k2-tis", losscfg.AlgoGRPO, func(c *losscfg.PolicyConfig) { c.KLEstimator, c.TISThreshold = "k2", 2 })
	add("dapo-dual-entropy", losscfg.AlgoDAPO, func(c *losscfg.PolicyConfig) { c.DualClip, c.EntropyCoef = 3, 0.01 })
	add("dr_grpo-maxlen", losscfg.AlgoDrGRPO, func(c *losscfg.PolicyConfig) { c.MaxLen = 16 })
	add("ppo-unclipped-value-kl", losscfg.AlgoPPO, func(c *losscfg.PolicyConfig) { c.ValueClip, c.KLBeta, c.EntropyCoef = 0, 0.1, 0.05 })
	add("gspo-wide-kl-tis", losscfg.AlgoGSPO, func(c *losscfg.PolicyConfig) { c.ClipLow, c.ClipHigh, c.KLBeta, c.TISThreshold = 0.05, 0.1, 0.02, 1.5 })
	add("rloo-seq-mean-token-mean", losscfg.AlgoRLOO, func(c *losscfg.PolicyConfig) { c.Aggregation = losscfg.AggSeqMeanTokenMean })
	// Off-policy corrections on the shared data, whose π_old/π_behaviour log-ratios are (−0.1, 1, 0.1),
	// (0.1, 0) and (−0.1, 0.1, −0.6, 0.1): mis [0.5, 2] rejects the ratio e ≈ 2.72; icepop [0.6, 2.5]
	// zeroes e and e^−0.6 ≈ 0.55; geo_mask [0.7, 1.05] drops row 1 (mean 0.05 > ln 1.05).
	add("grpo-tis-explicit", losscfg.AlgoGRPO, func(c *losscfg.PolicyConfig) { c.Correction = losscfg.Correction{Mode: losscfg.CorrectionTIS, High: 2} })
	add("grpo-mis", losscfg.AlgoGRPO, func(c *losscfg.PolicyConfig) { c.Correction = losscfg.Correction{Mode: losscfg.CorrectionMIS} })
	add("grpo-icepop-k1", losscfg.AlgoGRPO, func(c *losscfg.PolicyConfig) {
		c.KLEstimator, c.Correction = "k1", losscfg.Correction{Mode: losscfg.CorrectionIcePop, Low: 0.6, High: 2.5}
	})
	add("grpo-geo-default-drops-all", losscfg.AlgoGRPO, func(c *losscfg.PolicyConfig) { c.Correction = losscfg.Correction{Mode: losscfg.CorrectionGeoMask} })
	add("dapo-geo-dual", losscfg.AlgoDAPO, func(c *losscfg.PolicyConfig) {
		c.DualClip, c.Correction = 3, losscfg.Correction{Mode: losscfg.CorrectionGeoMask, Low: 0.7, High: 1.05}
	})
	add("gspo-wide-mis", losscfg.AlgoGSPO, func(c *losscfg.PolicyConfig) {
		c.ClipLow, c.ClipHigh, c.Correction = 0.05, 0.1, losscfg.Correction{Mode: losscfg.CorrectionMIS, Low: 0.8, High: 1.3}
	})
	add("rloo-mis", losscfg.AlgoRLOO, func(c *losscfg.PolicyConfig) { c.Correction = losscfg.Correction{Mode: losscfg.CorrectionMIS} })
	add("dr_grpo-icepop-maxlen", losscfg.AlgoDrGRPO, func(c *losscfg.PolicyConfig) {
		c.MaxLen, c.Correction = 16, losscfg.Correction{Mode: losscfg.CorrectionIcePop, Low: 0.6, High: 2.5}
	})
	add("ppo-geo-value-kl", losscfg.AlgoPPO, func(c *losscfg.PolicyConfig) {
		c.KLBeta, c.Correction = 0.1, losscfg.Correction{Mode: losscfg.CorrectionGeoMask, Low: 0.7, High: 1.05}
	})
	add("cispo-tis-kl-entropy", losscfg.AlgoCISPO, func(c *losscfg.PolicyConfig) { c.TISThreshold, c.KLBeta, c.EntropyCoef = 1.5, 0.05, 0.01 })
	add("cispo-icepop", losscfg.AlgoCISPO, func(c *losscfg.PolicyConfig) {
		c.Correction = losscfg.Correction{Mode: losscfg.CorrectionIcePop, Low: 0.6, High: 2.5}
	})
	add("cispo-mis-seq-mean", losscfg.AlgoCISPO, func(c *losscfg.PolicyConfig) {
		c.ClipLow, c.ClipHigh, c.Aggregation, c.Correction = 0.2, 0.28, losscfg.AggSeqMeanTokenMean, losscfg.Correction{Mode: losscfg.CorrectionMIS}
	})
	return cases
}

func TestPolicyLossMatchesReference(t *testing.T) {
	for name, cfg := range pgPolicyCases() {
		for _, adv := range []any{pgAdvSeq, pgAdvTok} {
			label := fmt.Sprintf("%s/%T", name, adv)
			var keys []string
			out := pgExec(t, func(in []*Node) []*Node {
				loss, m := PolicyLoss(cfg, PolicyInputs{Logp: in[0], OldLogp: in[1], BehaviourLogp: in[2], RefLogp: in[3],
					Advantages: in[4], Mask: in[5], Entropy: in[6], Values: in[7], OldValues: in[8], Returns: in[9]})
				keys = pgSortedKeys(m)
				res := []*Node{loss, Gradient(loss, in[0])[0]}
				for _, k := range keys {
					res = append(res, m[k])
				}
				return res
			}, pgLogp, pgOld, pgBeh, pgRef, adv, pgMask, pgEnt, pgVal, pgOldVal, pgRet)
			want, wantM, wantGrad := pgRefPolicyLoss(cfg, adv)
			pgCheckScalar(t, label+"/loss", out[0][0], want)
			pgCheckMatrix(t, label+"/dloss/dlogp", out[1], wantGrad)
			pgCheckMetrics(t, label, keys, out[2:], wantM)
		}
	}
}

// TestPolicyLossGradientOnPolicy: GRPO defaults, OldLogp nil (ratio 1, no clipping), k3 KL. With
// seq-mean-token-mean over R rows, d loss/d logp_it = m_it/(n_i·R)·(−A_i + β(1 − e^{−(logp−ref)})).
func TestPolicyLossGradientOnPolicy(t *testing.T) {
	cfg := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
	grad := pgExec(t, func(in []*Node) []*Node {
		loss, _ := PolicyLoss(cfg, PolicyInputs{Logp: in[0], RefLogp: in[1], Advantages: in[2], Mask: in[3]})
		return Gradient(loss, in[0])
	}, pgLogp, pgRef, pgAdvSeq, pgMask)[0]
	logp, ref, mask := pgF64(pgLogp), pgF64(pgRef), pgF64(pgMask)
	n := []float64{3, 2, 4}
	want := pgMap(3, 4, func(i, t int) float64 {
		x := pgRefClip(logp[i][t]-ref[i][t], -20, 20)
		return mask[i][t] / (n[i] * 3) * (-float64(pgAdvSeq[i]) + cfg.KLBeta*(1-math.Exp(-x)))
	})
	pgCheckMatrix(t, "grad", grad, want)
}

func TestPolicyLossPanicsOnMissingInput(t *testing.T) {
	cases := map[string]func(c *losscfg.PolicyConfig){
		"RefLogp":             func(c *losscfg.PolicyConfig) {}, // grpo: kl_beta 0.04
		"BehaviourLogp":       func(c *losscfg.PolicyConfig) { c.KLBeta, c.TISThreshold = 0, 2 },
		"correction mode mis": func(c *losscfg.PolicyConfig) { c.KLBeta, c.Correction.Mode = 0, losscfg.CorrectionMIS },
		"correction mode tis": func(c *losscfg.PolicyConfig) { c.KLBeta, c.Correction.Mode = 0, losscfg.CorrectionTIS },
		"Entropy":             func(c *losscfg.PolicyConfig) { c.KLBeta, c.EntropyCoef = 0, 0.01 },
		"Values":              func(c *losscfg.PolicyConfig) { c.KLBeta, c.ValueCoef = 0, 0.5 },
		"algorithm":           func(c *losscfg.PolicyConfig) { c.Algorithm = "nope" },
	}
	for want, edit := range cases {
		cfg := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
		edit(&cfg)
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			pgExec(t, func(in []*Node) []*Node {
				loss, _ := PolicyLoss(cfg, PolicyInputs{Logp: in[0], Advantages: in[1], Mask: in[0]})
				return []*Node{loss}
			}, pgLogp, pgAdvSeq)
			return ""
		}()
		if !strings.Contains(msg, want) {
			t.Errorf("missing %s: panic %q", want, msg)
		}
	}
}
