package loss

import (
	"fmt"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// refLogOdds is log(p/(1−p)) for lp = log p, with LogOdds's clamp.
func refLogOdds(lp float64) float64 {
	x := math.Min(lp, f32(logOddsMaxLogProb))
	return x - math.Log(-math.Expm1(x))
}

func refORPO(pc prefCase, lambda float64) (float64, map[string]float64) {
	o := pc.rows()
	nll := o.nllSum / math.Max(o.nllCnt, 1)
	n := len(o.w)
	ratio, or, acc := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		ratio[i] = refLogOdds(o.avgC[i]) - refLogOdds(o.avgR[i])
		or[i] = -refLogSigmoid(ratio[i])
		if ratio[i] > 0 {
			acc[i] = 1
		}
	}
	orMean := refMean(or, o.w)
	return nll + lambda*orMean, map[string]float64{
		"nll": nll, "or_loss": orMean, "log_odds_ratio": refMean(ratio, o.w),
		"logps/chosen": refMean(o.avgC, o.w), "logps/rejected": refMean(o.avgR, o.w), "rewards/accuracy": refMean(acc, o.w),
	}
}

func TestLogOdds(t *testing.T) {
	clamp := f32(logOddsMaxLogProb)
	xs := []float64{0, -1e-8, -1e-7, -2e-7, -1e-6, -3e-5, -1e-3, -0.1, -0.5, -0.69, -math.Ln2, -0.7, -1, -5, -30, -100}
	in := make([]float32, len(xs))
	for i, x := range xs {
		in[i] = float32(x)
	}
	out := run1(t, func(in []*Node) []*Node {
		lo := LogOdds(in[0])
		return []*Node{lo, Gradient(ReduceAllSum(lo), in[0])[0]}
	}, [][]float32{in})
	for i, x := range xs {
		x = f32(x)
		want := refLogOdds(x)
		wantGrad := 0.0 // clamped: p beyond 1 − 1e-7
		if x < clamp {
			wantGrad = -1 / math.Expm1(x) // d/dx [x − log(1 − eˣ)] = 1/(1 − eˣ)
		}
		if got := float64(out[0][i]); !near(got, want, 1e-6) || math.IsInf(got, 0) {
			t.Errorf("LogOdds(%g) = %.8g, want %.8g", x, got, want)
		}
		if got := float64(out[1][i]); math.Abs(got-wantGrad) > 1e-5*math.Max(1, math.Abs(wantGrad)) {
			t.Errorf("d LogOdds/dx at %g = %.8g, want %.8g", x, got, wantGrad)
		}
	}
	// Hand values: p = 1/2 → 0; p = 1/4 → log(1/3); p = 0.9 → log 9.
	for _, c := range []struct{ p, want float64 }{{0.5, 0}, {0.25, -math.Log(3)}, {0.9, math.Log(9)}} {
		if got := refLogOdds(math.Log(c.p)); !near(got, c.want, 1e-12) {
			t.Errorf("refLogOdds(log %v) = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestORPOMatchesReference(t *testing.T) {
	for _, pc := range prefCases {
		for _, lambda := range []float64{0.1, 1} {
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return ORPO(pairInputs(in), lambda) }, pc.inputs()...)
			want, wantM := refORPO(pc, lambda)
			t.Run(fmt.Sprintf("%s/λ=%g", pc.name, lambda), func(t *testing.T) { checkLoss(t, got, gotM, want, wantM) })
		}
	}
}

func TestORPOHandComputed(t *testing.T) {
	l2, l4 := math.Log(0.5), math.Log(0.25)
	cases := []struct {
		name   string
		pc     prefCase
		lambda float64
		want   float64
	}{
		// Both completions at p = 1/2: odds 1 each, L_OR = log 2; NLL = log 2.
		{"p=.5 both", prefCase{c: [][]float64{{l2, l2}}, cm: [][]float64{{1, 1}}, r: [][]float64{{l2, -9}}, rm: [][]float64{{1, 0}}},
			0.1, math.Ln2 + 0.1*math.Ln2},
		// Chosen p = 1/2 (odds 1), rejected p = 1/4 (odds 1/3): ratio log 3, L_OR = log(1 + 1/3) = log(4/3).
		{"odds 3:1", prefCase{c: [][]float64{{l2}}, cm: [][]float64{{1}}, r: [][]float64{{l4, l4}}, rm: [][]float64{{1, 1}}},
			1, math.Ln2 + math.Log(4.0/3)},
		// Two pairs: NLL is the token mean over the batch, (3·log 2 + 2·log 4)/5 = 7/5·log 2; L_OR per pair
		// log 2 (equal odds) and log(1 + 3) (chosen odds 1/3, rejected odds 1).
		{"two pairs", prefCase{c: [][]float64{{l2, l2, l2}, {l4, l4, 0}}, cm: [][]float64{{1, 1, 1}, {1, 1, 0}},
			r: [][]float64{{l2}, {l2}}, rm: [][]float64{{1}, {1}}},
			0.5, 1.4*math.Ln2 + 0.5*(math.Ln2+math.Log(4))/2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wantM := refORPO(c.pc, c.lambda)
			if !near(want, c.want, 1e-7) { // log 1/2 and log 1/4 are rounded through float32
				t.Fatalf("reference %v, hand %v", want, c.want)
			}
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return ORPO(pairInputs(in), c.lambda) }, c.pc.inputs()...)
			checkLoss(t, got, gotM, c.want, wantM)
		})
	}
}

// TestORPOCertainChosen: a chosen completion at probability 1 (every token log-prob 0) hits the
// log-odds clamp; the loss and gradients stay finite and the NLL still pulls chosen up.
func TestORPOCertainChosen(t *testing.T) {
	pc := prefCase{c: [][]float64{{0, 0}, {-0.5, -1}}, cm: [][]float64{{1, 1}, {1, 1}},
		r: [][]float64{{-1, -2}, {-0.2, -0.1}}, rm: [][]float64{{1, 1}, {1, 1}}}
	got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return ORPO(pairInputs(in), 0.1) }, pc.inputs()...)
	want, wantM := refORPO(pc, 0.1)
	checkLoss(t, got, gotM, want, wantM)
	g := evalGrads(t, func(in []*Node) (*Node, Metrics) { return ORPO(pairInputs(in), 0.1) }, []int{0, 2}, pc.inputs()...)
	for i, row := range g[0] {
		for j, v := range row {
			if !(v < 0) || math.IsInf(v, 0) {
				t.Errorf("d loss/d chosen[%d][%d] = %v, want finite < 0", i, j, v)
			}
		}
	}
	for i, row := range g[1] {
		for j, v := range row {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("d loss/d rejected[%d][%d] = %v, want finite > 0", i, j, v)
			}
		}
	}
}

func TestORPOGradients(t *testing.T) {
	for _, pc := range prefCases {
		t.Run(pc.name, func(t *testing.T) {
			checkPairGrads(t, pc, func(in []*Node) (*Node, Metrics) { return ORPO(pairInputs(in), 0.5) },
				func(pc prefCase) float64 { l, _ := refORPO(pc, 0.5); return l }, -1, 1)
		})
	}
}

func TestORPOSGDStep(t *testing.T) {
	checkSGDPair(t, func(p PrefPair) (*Node, Metrics) { return ORPO(p, 0.1) })
}
