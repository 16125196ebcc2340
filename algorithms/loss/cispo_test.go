package loss

import (
	"fmt"
	"math"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// cispoRef is the plain-Go float64 reference of CISPOSurrogate for one token: the loss
// −clip(r, 1−ε_low, 1+ε_high)·A·logp and its analytic gradient with respect to logp, −clip(r)·A
// (the clipped weight is a constant).
func cispoRef(logp, old, a, el, eh float64) (loss, grad float64) {
	r := math.Exp(pgRefClip(logp-old, -20, 20))
	w := pgRefClip(r, 1-el, 1+eh)
	return -w * a * logp, -w * a
}

// TestCISPOSurrogateHandComputed: π_old(y) = e^−1, so logp = ln r − 1. The loss and gradient were
// worked out by hand; where PPO would drop the token's gradient (r = 5 > 1+ε with A > 0) CISPO keeps
// it at the capped weight.
func TestCISPOSurrogateHandComputed(t *testing.T) {
	cases := []struct {
		name             string
		ratio, adv       float64
		epsLow, epsHigh  float64
		wantLoss, wantDl float64
	}{
		{"on-policy: weight 1", 1, 2, 1, 3, 2, -2},
		{"r=5 capped at 4, A>0: gradient kept (PPO: 0)", 5, 1, 1, 3, -2.437751649736401, -4},
		{"r=5 capped at 4, A<0", 5, -1, 1, 3, 2.437751649736401, 4},
		{"r=3 inside [0, 4]", 3, 1, 1, 3, -0.29583686600432935, -3},
		{"r=0.5 floored at 0.8", 0.5, 1, 0.2, 0.2, 1.3545177444479564, -0.8},
		{"r=0.5, no lower bound", 0.5, -1, 1, 3, -0.8465735902799727, 0.5},
		{"r=1.1 inside [0.8, 1.2]", 1.1, 0.5, 0.2, 0.2, 0.4975794011076213, -0.55},
		{"A=0", 1.7, 0, 1, 3, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logp := [][]float32{{float32(math.Log(c.ratio) - 1)}}
			old := [][]float32{{-1}}
			out := pgExec(t, func(in []*Node) []*Node {
				l, _ := CISPOSurrogate(in[0], in[1], in[2], in[3], c.epsLow, c.epsHigh)
				return []*Node{l, Gradient(ReduceAllSum(l), in[0])[0]}
			}, logp, old, []float32{float32(c.adv)}, [][]float32{{1}})
			pgCheckScalar(t, "loss", out[0][0], c.wantLoss)
			pgCheckScalar(t, "dloss/dlogp", out[1][0], c.wantDl)
			l, g := cispoRef(float64(logp[0][0]), -1, c.adv, c.epsLow, c.epsHigh)
			pgCheckScalar(t, "reference loss", float32(l), c.wantLoss)
			pgCheckScalar(t, "reference grad", float32(g), c.wantDl)
		})
	}
}

// TestCISPOSurrogateMatchesReference: values, gradients (token-mean aggregation) and metrics on the
// shared policy data, sequence- and token-level advantages, several clip ranges.
func TestCISPOSurrogateMatchesReference(t *testing.T) {
	logp, old, mask := pgF64(pgLogp), pgF64(pgOld), pgF64(pgMask)
	for _, adv := range []any{pgAdvSeq, pgAdvTok} {
		a := pgTokenAdv(adv, 3, 4)
		for _, e := range [][2]float64{{1, 3}, {0.2, 0.28}, {0.05, 0.1}, {1, 0}} {
			name := fmt.Sprintf("adv%T/eps%v", adv, e)
			out, keys := surrogateExec(t, losscfg.AggTokenMean, func(logp, old, adv, mask *Node) (*Node, map[string]*Node) {
				return CISPOSurrogate(logp, old, adv, mask, e[0], e[1])
			}, pgLogp, pgOld, adv, pgMask)
			n := 9.0 // counted tokens
			wantLoss := pgMap(3, 4, func(i, t int) float64 { l, _ := cispoRef(logp[i][t], old[i][t], a[i][t], e[0], e[1]); return l })
			wantGrad := pgMap(3, 4, func(i, t int) float64 {
				_, g := cispoRef(logp[i][t], old[i][t], a[i][t], e[0], e[1])
				return mask[i][t] / n * g
			})
			pgCheckMatrix(t, name+"/loss", out[0], wantLoss)
			pgCheckMatrix(t, name+"/grad", out[1], wantGrad)
			ratio := pgMap(3, 4, func(i, t int) float64 { return math.Exp(pgRefClip(logp[i][t]-old[i][t], -20, 20)) })
			tokMean := func(f func(r float64) float64) float64 {
				return pgRefAggregate(pgMap(3, 4, func(i, t int) float64 { return f(ratio[i][t]) }), mask, losscfg.AggTokenMean, 0)
			}
			pgCheckMetrics(t, name, keys, out[2:], map[string]float64{
				"approx_kl":      tokMean(func(r float64) float64 { return r - 1 - math.Log(r) }),
				"ratio_mean":     tokMean(func(r float64) float64 { return r }),
				"clip_frac_low":  tokMean(func(r float64) float64 { return b01(r < 1-e[0]) }),
				"clip_frac_high": tokMean(func(r float64) float64 { return b01(r > 1+e[1]) }),
			})
		}
	}
}

// TestCISPOConfig: cispo's defaults (MiniMax-M1's token-level normalisation, no lower bound, weight
// cap 4) and the fields it refuses.
func TestCISPOConfig(t *testing.T) {
	c := losscfg.DefaultPolicyConfig(losscfg.AlgoCISPO)
	if c.ClipLow != 1 || c.ClipHigh != 3 || c.KLBeta != 0 || c.Aggregation != losscfg.AggTokenMean || c.DualClip != 0 ||
		c.EntropyCoef != 0 || c.KLEstimator != "k3" || !c.Correction.Off() {
		t.Errorf("cispo defaults %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("cispo defaults: %v", err)
	}
	for _, tc := range []struct {
		edit func(*losscfg.PolicyConfig)
		want string
	}{
		{func(c *losscfg.PolicyConfig) { c.ClipLow = 1.5 }, "clip_low=1.5: cispo: must be in [0, 1]"},
		{func(c *losscfg.PolicyConfig) { c.DualClip = 5 }, "dual_clip=5: cispo has no dual clip"},
	} {
		c := losscfg.DefaultPolicyConfig(losscfg.AlgoCISPO)
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	if err := (losscfg.PolicyConfig{Algorithm: losscfg.AlgoGRPO, ClipLow: 1, ClipHigh: 0.2, KLEstimator: "k3", Aggregation: losscfg.AggTokenMean}).Validate(); err == nil {
		t.Error("grpo accepted clip_low 1 (only cispo's IS-weight floor may be 0)")
	}
}
