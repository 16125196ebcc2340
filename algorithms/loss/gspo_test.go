package loss

import (
	"fmt"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// pgGSPOData: per-token log-ratios d = logp − oldLogp chosen so that, with ε = 3e-4/4e-4, row 0's
// sequence ratio is inside the clip range (s ≈ 1.0000667), row 1's above it (s ≈ 1.0011) and row 2's
// below it (s ≈ 0.99938). Padding holds junk.
func pgGSPOData() (logp, old [][]float32) {
	d := [][]float64{{0.0002, -0.0001, 0.0001, 5}, {0.001, 0.0012, -7, 7}, {-0.001, -0.0005, -0.0008, -0.0002}}
	logp = pgLogp
	old = make([][]float32, len(logp))
	for i := range logp {
		old[i] = make([]float32, len(logp[i]))
		for t := range logp[i] {
			old[i][t] = float32(float64(logp[i][t]) - d[i][t])
		}
	}
	return logp, old
}

// pgRefGSPORatios returns the per-row sequence ratios s_i of the reference.
func pgRefGSPORatios(logp, old, mask [][]float64) []float64 {
	lr := pgMap(len(logp), len(logp[0]), func(i, t int) float64 { return logp[i][t] - old[i][t] })
	s := make([]float64, len(logp))
	for i := range s {
		s[i] = math.Exp(math.Min(pgRefSeqMean(lr, mask, i), 10))
	}
	return s
}

func TestGSPOHandComputed(t *testing.T) {
	// Each row has a constant per-token log-ratio d, so s = e^d exactly.
	cases := []struct {
		name    string
		d, adv  float64
		wantTok float64
	}{
		{"s = 1 → −A", 0, 0.7, -0.7},
		{"s at 1+ε_high", math.Log(1.0004), 1, -1.0004},
		{"s above 1+ε_high, A>0: clipped", math.Log(1.01), 1, -1.0004},
		{"s above 1+ε_high, A<0: unclipped", math.Log(1.01), -1, 1.01},
		{"s below 1−ε_low, A<0: clipped", math.Log(0.99), -2, 2 * 0.9997},
		{"s below 1−ε_low, A>0: unclipped", math.Log(0.99), 2, -2 * 0.99},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logp := [][]float32{{-1, -2, 0}}
			old := [][]float32{{float32(-1 - c.d), float32(-2 - c.d), 3}}
			out := pgExec(t, func(in []*Node) []*Node {
				l, _ := GSPOSurrogate(in[0], in[1], in[2], in[3], 3e-4, 4e-4)
				return []*Node{Aggregate(l, in[3], losscfg.AggSeqMeanTokenMean, 0)}
			}, logp, old, []float32{float32(c.adv)}, [][]float32{{1, 1, 0}})
			// float32 rounding of logp − d moves s by ~1e-7: well inside the 1e-5 tolerance.
			pgCheckScalar(t, "loss", out[0][0], c.wantTok)
		})
	}
}

func TestGSPOMatchesReference(t *testing.T) {
	logp32, old32 := pgGSPOData()
	logp, old, mask := pgF64(logp32), pgF64(old32), pgF64(pgMask)
	s := pgRefGSPORatios(logp, old, mask)
	for _, adv := range []any{pgAdvSeq, pgAdvTok, []float32{-1.5, -0.8, 0.3}} {
		a := pgTokenAdv(adv, 3, 4)
		for _, e := range [][2]float64{{3e-4, 4e-4}, {1e-3, 1e-3}, {0.2, 0.2}} {
			name := fmt.Sprintf("%v/eps%v", adv, e)
			out, keys := surrogateExec(t, losscfg.AggSeqMeanTokenMean, func(logp, old, adv, mask *Node) (*Node, map[string]*Node) {
				return GSPOSurrogate(logp, old, adv, mask, e[0], e[1])
			}, logp32, old32, adv, pgMask)
			wantLoss := pgMap(3, 4, func(i, t int) float64 { return pgRefClipLoss(s[i], a[i][t], e[0], e[1], 0) })
			pgCheckMatrix(t, name+"/loss", out[0], wantLoss)
			// Sequence-form gradient: ∂s_i/∂logp_it = s_i·m_it/n_i, through the active branch only.
			n := []float64{3, 2, 4}
			wantGrad := pgMap(3, 4, func(i, t int) float64 {
				return mask[i][t] / (n[i] * 3) * pgRefClipGrad(s[i], a[i][t], e[0], e[1], 0)
			})
			pgCheckMatrix(t, name+"/grad", out[1], wantGrad)
			b01 := func(b bool) float64 {
				if b {
					return 1
				}
				return 0
			}
			sTok := pgMap(3, 4, func(i, t int) float64 { return s[i] })
			pgCheckMetrics(t, name, keys, out[2:], map[string]float64{
				"ratio_mean": pgRefRowMean(sTok, mask),
				"approx_kl": pgRefAggregate(pgMap(3, 4, func(i, t int) float64 {
					r := math.Exp(pgRefClip(logp[i][t]-old[i][t], -20, 20))
					return r - 1 - math.Log(r)
				}), mask, losscfg.AggTokenMean, 0),
				"clip_frac_low":  pgRefRowMean(pgMap(3, 4, func(i, t int) float64 { return b01(a[i][t] < 0 && s[i] < 1-e[0]) }), mask),
				"clip_frac_high": pgRefRowMean(pgMap(3, 4, func(i, t int) float64 { return b01(a[i][t] > 0 && s[i] > 1+e[1]) }), mask),
			})
		}
	}
}

// TestGSPOGradientSign: positive advantages push every token of an unclipped sequence up (negative
// gradient) and leave a clipped one alone.
func TestGSPOGradientSign(t *testing.T) {
	logp, old := pgGSPOData()
	grad := pgExec(t, func(in []*Node) []*Node {
		l, _ := GSPOSurrogate(in[0], in[1], in[2], in[3], 3e-4, 4e-4)
		return Gradient(Aggregate(l, in[3], losscfg.AggSeqMeanTokenMean, 0), in[0])
	}, logp, old, []float32{1, 1, 1}, pgMask)[0]
	for t2, g := range grad[0:3] { // row 0: inside
		if !(g < 0) {
			t.Errorf("row 0 token %d: grad %g, want < 0", t2, g)
		}
	}
	for t2, g := range grad[4:6] { // row 1: s > 1+ε_high, A > 0: clipped
		if g != 0 {
			t.Errorf("row 1 token %d: grad %g, want 0", t2, g)
		}
	}
	for t2, g := range grad[8:12] { // row 2: s < 1−ε_low, A > 0: unclipped
		if !(g < 0) {
			t.Errorf("row 2 token %d: grad %g, want < 0", t2, g)
		}
	}
	for _, k := range []int{3, 6, 7} {
		if grad[k] != 0 {
			t.Errorf("padding %d: grad %g, want 0", k, grad[k])
		}
	}
}
