package loss

import (
	"fmt"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

func refIPO(pc prefCase, beta float64, average bool) (float64, map[string]float64) {
	o := pc.rows()
	lc, lr := o.sumDC, o.sumDR
	if average {
		lc, lr = o.avgDC, o.avgDR
	}
	losses := make([]float64, len(o.w))
	for i := range o.w {
		d := lc[i] - lr[i] - 1/(2*beta)
		losses[i] = d * d
	}
	m := refRewardMetrics(scaled(lc, beta), scaled(lr, beta), o.w)
	m["kl_ref"] = refMean(o.sumDC, o.w)
	return refMean(losses, o.w), m
}

func TestIPOMatchesReference(t *testing.T) {
	for _, pc := range prefCases {
		for _, p := range []struct {
			beta    float64
			average bool
		}{{0.1, true}, {0.1, false}, {0.5, true}, {2, false}} {
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return IPO(pairInputs(in), p.beta, p.average) }, pc.inputs()...)
			want, wantM := refIPO(pc, p.beta, p.average)
			t.Run(fmt.Sprintf("%s/β=%g,average=%v", pc.name, p.beta, p.average), func(t *testing.T) { checkLoss(t, got, gotM, want, wantM) })
		}
	}
}

func TestIPOHandComputed(t *testing.T) {
	// Chosen log-ratios per token [1, 1] (sum 2, mean 1), rejected [-1] (sum −1, mean −1).
	pc := prefCase{c: [][]float64{{1, 1}}, cm: [][]float64{{1, 1}}, r: [][]float64{{-1, 7}}, rm: [][]float64{{1, 0}},
		rc: [][]float64{{0, 0}}, rr: [][]float64{{0, 0}}}
	eq := prefCase{c: [][]float64{{-2}}, cm: [][]float64{{1}}, r: [][]float64{{-3}}, rm: [][]float64{{1}},
		rc: [][]float64{{-2}}, rr: [][]float64{{-3}}}
	cases := []struct {
		name    string
		pc      prefCase
		beta    float64
		average bool
		want    float64
	}{
		{"Δ=0 β=0.1", eq, 0.1, true, 25},           // (0 − 5)²
		{"sums β=0.5", pc, 0.5, false, 4},          // Δ = 2 − (−1) = 3; (3 − 1)²
		{"means β=0.5", pc, 0.5, true, 1},          // Δ = 1 − (−1) = 2; (2 − 1)²
		{"on target β=1/6", pc, 1.0 / 6, false, 0}, // target 1/(2β) = 3 = Δ
		{"overshoot β=1", pc, 1, true, 1.5 * 1.5},  // Δ = 2, target 0.5
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wantM := refIPO(c.pc, c.beta, c.average)
			if !near(want, c.want, 1e-12) {
				t.Fatalf("reference %v, hand %v", want, c.want)
			}
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return IPO(pairInputs(in), c.beta, c.average) }, c.pc.inputs()...)
			checkLoss(t, got, gotM, c.want, wantM)
		})
	}
}

// TestIPOGradients: below the target margin IPO pushes chosen up and rejected down; above it (the
// large-margins case at β = 0.5 has Δ far beyond 1/(2β) on row 0) the sign flips, so only the finite
// difference is checked there.
func TestIPOGradients(t *testing.T) {
	for _, pc := range prefCases {
		for _, average := range []bool{true, false} {
			o := pc.rows()
			below := true
			for i := range o.w {
				d := o.sumDC[i] - o.sumDR[i]
				if average {
					d = o.avgDC[i] - o.avgDR[i]
				}
				if o.w[i] == 1 && d >= 1/(2*0.5) {
					below = false
				}
			}
			sc, sr := -1.0, 1.0
			if !below {
				sc, sr = 0, 0
			}
			t.Run(fmt.Sprintf("%s/average=%v", pc.name, average), func(t *testing.T) {
				checkPairGrads(t, pc, func(in []*Node) (*Node, Metrics) { return IPO(pairInputs(in), 0.5, average) },
					func(pc prefCase) float64 { l, _ := refIPO(pc, 0.5, average); return l }, sc, sr)
			})
		}
	}
}

func TestIPOSGDStep(t *testing.T) {
	checkSGDPair(t, func(p PrefPair) (*Node, Metrics) { return IPO(p, 0.1, true) })
	checkSGDPair(t, func(p PrefPair) (*Node, Metrics) { return IPO(p, 0.1, false) })
}
