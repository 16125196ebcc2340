package loss

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

func TestKLPenaltyHandComputed(t *testing.T) {
	ln2 := math.Ln2
	cases := []struct {
		name       string
		pi, piRef  float64
		k1, k2, k3 float64
	}{
		{"π = π_ref", 0.3, 0.3, 0, 0, 0},
		{"π = 2·π_ref", 0.5, 0.25, ln2, 0.5 * ln2 * ln2, 0.5 - 1 + ln2}, // k3 = ½ − 1 + ln 2 ≈ 0.1931
		{"π = ½·π_ref", 0.25, 0.5, -ln2, 0.5 * ln2 * ln2, 2 - 1 - ln2},  // k3 = 1 − ln 2 ≈ 0.3069
		{"π = 0.1, π_ref = 0.4", 0.1, 0.4, math.Log(0.25), 0.5 * math.Log(0.25) * math.Log(0.25), 4 - 1 + math.Log(0.25)},
	}
	for _, c := range cases {
		for est, want := range map[losscfg.KLEstimator]float64{losscfg.KLK1: c.k1, losscfg.KLK2: c.k2, losscfg.KLK3: c.k3} {
			logp := [][]float32{{float32(math.Log(c.pi))}}
			ref := [][]float32{{float32(math.Log(c.piRef))}}
			out := pgExec(t, func(in []*Node) []*Node {
				kl := KLPenalty(in[0], in[1], est)
				return []*Node{kl, Gradient(ReduceAllSum(kl), in[0])[0], Gradient(ReduceAllSum(kl), in[1])[0]}
			}, logp, ref)
			pgCheckScalar(t, c.name+"/"+string(est), out[0][0], want)
			x := math.Log(c.pi / c.piRef)
			pgCheckScalar(t, c.name+"/"+string(est)+"/ref", float32(pgRefKL(x, est)), want)
			wantGrad := map[losscfg.KLEstimator]float64{losscfg.KLK1: 1, losscfg.KLK2: x, losscfg.KLK3: 1 - math.Exp(-x)}[est]
			pgCheckScalar(t, c.name+"/"+string(est)+"/dlogp", out[1][0], wantGrad)
			pgCheckScalar(t, c.name+"/"+string(est)+"/dref (constant)", out[2][0], 0)
		}
	}
}

func TestKLPenaltyMatchesReference(t *testing.T) {
	logp, ref := pgF64(pgLogp), pgF64(pgRef)
	for _, est := range losscfg.KLEstimators {
		got := pgExec(t, func(in []*Node) []*Node { return []*Node{KLPenalty(in[0], in[1], est)} }, pgLogp, pgRef)[0]
		pgCheckMatrix(t, string(est), got, pgMap(3, 4, func(i, t int) float64 { return pgRefKL(logp[i][t]-ref[i][t], est) }))
	}
	// k3 and k2 are non-negative; k3 stays finite far from the reference.
	got := pgExec(t, func(in []*Node) []*Node { return []*Node{KLPenalty(in[0], in[1], losscfg.KLK3)} },
		[][]float32{{-200, 0}}, [][]float32{{0, -200}})[0]
	for i, v := range got {
		if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) || v < 0 {
			t.Errorf("k3 extreme %d = %g, want finite ≥ 0", i, v)
		}
	}
	if err := losscfg.KLEstimator("k4").Validate(); err == nil {
		t.Error("k4 accepted")
	}
}
