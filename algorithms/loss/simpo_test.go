package loss

import (
	"fmt"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

func refSimPO(pc prefCase, beta, gamma, eps float64) (float64, map[string]float64) {
	o := pc.rows()
	rc, rr := scaled(o.avgC, beta), scaled(o.avgR, beta)
	losses := make([]float64, len(o.w))
	for i := range o.w {
		losses[i] = refSigmoidLoss(rc[i]-rr[i]-gamma, eps)
	}
	return refMean(losses, o.w), refRewardMetrics(rc, rr, o.w)
}

func TestSimPOMatchesReference(t *testing.T) {
	for _, pc := range prefCases {
		for _, p := range []struct{ beta, gamma, eps float64 }{{2, 1, 0}, {2.5, 0.5, 0.1}, {0.5, 0, 0.3}} {
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return SimPO(pairInputs(in), p.beta, p.gamma, p.eps) }, pc.inputs()...)
			want, wantM := refSimPO(pc, p.beta, p.gamma, p.eps)
			t.Run(fmt.Sprintf("%s/β=%g,γ=%g,ε=%g", pc.name, p.beta, p.gamma, p.eps), func(t *testing.T) { checkLoss(t, got, gotM, want, wantM) })
		}
	}
}

func TestSimPOHandComputed(t *testing.T) {
	// Chosen tokens [−1, −3] (mean −2), rejected [−2, pad] (mean −2): equal averaged rewards.
	eq := prefCase{c: [][]float64{{-1, -3}}, cm: [][]float64{{1, 1}}, r: [][]float64{{-2, -50}}, rm: [][]float64{{1, 0}}}
	// Chosen mean −1, rejected mean −2: β = 2 gives rewards −2 and −4, margin 2.
	up := prefCase{c: [][]float64{{-1, -1}}, cm: [][]float64{{1, 1}}, r: [][]float64{{-2, -2, -2}}, rm: [][]float64{{1, 1, 1}}}
	cases := []struct {
		name             string
		pc               prefCase
		beta, gamma, eps float64
		want, reward     float64
	}{
		{"equal γ=0", eq, 2, 0, 0, math.Ln2, -4},                    // −log σ(0)
		{"equal γ=1", eq, 2, 1, 0, math.Log1p(math.E), -4},          // −log σ(−1) = log(1+e)
		{"margin 2 γ=1", up, 2, 1, 0, math.Log1p(math.Exp(-1)), -2}, // −log σ(1)
		{"margin 2 γ=2", up, 2, 2, 0.2, math.Ln2, -2},               // z = 0
		{"margin 2 γ=0 ε=.1", up, 2, 0, 0.1, 0.9*math.Log1p(math.Exp(-2)) + 0.1*math.Log1p(math.Exp(2)), -2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wantM := refSimPO(c.pc, c.beta, c.gamma, c.eps)
			if !near(want, c.want, 1e-12) || !near(wantM["rewards/chosen"], c.reward, 1e-12) {
				t.Fatalf("reference %v %v, hand %v reward %v", want, wantM, c.want, c.reward)
			}
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return SimPO(pairInputs(in), c.beta, c.gamma, c.eps) }, c.pc.inputs()...)
			checkLoss(t, got, gotM, c.want, wantM)
		})
	}
}

// TestSimPOGradients checks signs without label smoothing (with ε > 0 the sign flips past the
// smoothed optimum z = log((1−ε)/ε); there only the finite difference is checked).
func TestSimPOGradients(t *testing.T) {
	checkSmoothedGrads(t, func(in []*Node, eps float64) (*Node, Metrics) { return SimPO(pairInputs(in), 2, 1, eps) },
		func(pc prefCase, eps float64) float64 { l, _ := refSimPO(pc, 2, 1, eps); return l })
}

func TestSimPOSGDStep(t *testing.T) {
	checkSGDPair(t, func(p PrefPair) (*Node, Metrics) { return SimPO(p, 2, 1, 0) })
}
