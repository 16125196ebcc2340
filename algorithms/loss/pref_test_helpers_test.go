package loss

import (
	"math"
	"sort"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// Plain-Go float64 references and graph-running helpers shared by the preference-loss tests.

// prefCase is a batch of preference pairs, written as float64 and rounded through float32 by both the
// graph (its inputs are float32) and the references, so the two see the same numbers.
type prefCase struct {
	name                 string
	c, cm, r, rm, rc, rr [][]float64 // policy chosen, chosen mask, rejected, rejected mask, ref chosen, ref rejected
}

// prefCases covers equal log-ratios (h = 0), padding inside rows (with garbage under the mask),
// different chosen/rejected lengths, an all-padding row, large margins, and near-certain completions.
var prefCases = []prefCase{
	{
		name: "equal",
		c:    [][]float64{{-1, -2}, {-0.5, -0.25}}, cm: [][]float64{{1, 1}, {1, 1}},
		r: [][]float64{{-3, -1}, {-2, -2}}, rm: [][]float64{{1, 1}, {1, 1}},
		rc: [][]float64{{-1, -2}, {-0.5, -0.25}}, rr: [][]float64{{-3, -1}, {-2, -2}},
	},
	{
		name: "padded",
		c:    [][]float64{{-0.7, -1.2, -99}, {-2.5, -0.1, -0.3}}, cm: [][]float64{{1, 1, 0}, {0, 1, 1}},
		r: [][]float64{{-1.5, -0.9, -2.2, -99}, {-0.4, -3.1, -99, -99}}, rm: [][]float64{{1, 1, 1, 0}, {1, 1, 0, 0}},
		rc: [][]float64{{-0.9, -1.0, -5}, {-2.0, -0.2, -0.6}}, rr: [][]float64{{-1.1, -1.3, -1.8, -7}, {-0.5, -2.0, -3, -3}},
	},
	{
		name: "padding-row",
		c:    [][]float64{{-0.2, -0.4, -0.6}, {-1.3, -0.8, -9}, {-50, -60, -70}},
		cm:   [][]float64{{1, 1, 1}, {1, 1, 0}, {0, 0, 0}},
		r:    [][]float64{{-0.9, -0.3, -1.6}, {-0.6, -9, -9}, {-40, -30, -20}},
		rm:   [][]float64{{1, 1, 1}, {1, 0, 0}, {0, 0, 0}},
		rc:   [][]float64{{-0.5, -0.5, -0.5}, {-1.0, -1.0, -1}, {-1, -2, -3}},
		rr:   [][]float64{{-0.7, -0.7, -0.7}, {-0.5, -1, -1}, {-4, -5, -6}},
	},
	{
		name: "large-margins",
		c:    [][]float64{{-1e-3, -2e-3, -5e-4}, {-30, -35, -40}}, cm: [][]float64{{1, 1, 1}, {1, 1, 1}},
		r: [][]float64{{-30, -25, -40}, {-1e-3, -1e-2, -3e-3}}, rm: [][]float64{{1, 1, 1}, {1, 1, 1}},
		rc: [][]float64{{-5, -5, -5}, {-5, -5, -5}}, rr: [][]float64{{-5, -5, -5}, {-5, -5, -5}},
	},
	{
		name: "near-certain",
		c:    [][]float64{{-1e-4, -2e-4}, {-3e-6, -1e-6}}, cm: [][]float64{{1, 1}, {1, 1}},
		r: [][]float64{{-0.69, -0.7}, {-2e-5, 0}}, rm: [][]float64{{1, 1}, {1, 0}},
		rc: [][]float64{{-0.1, -0.1}, {-0.01, -0.01}}, rr: [][]float64{{-0.3, -0.3}, {-0.01, -0.01}},
	},
}

// refRound makes the references round their inputs through float32 as the graph does; numGrad turns it
// off so that finite differences see the exact perturbation.
var refRound = true

func f32(x float64) float64 {
	if !refRound {
		return x
	}
	return float64(float32(x))
}

func toF32(x [][]float64) [][]float32 {
	out := make([][]float32, len(x))
	for i, row := range x {
		out[i] = make([]float32, len(row))
		for j, v := range row {
			out[i][j] = float32(v)
		}
	}
	return out
}

// refLogSigmoid is log σ(x) in float64, stable for large |x|.
func refLogSigmoid(x float64) float64 {
	if x < 0 {
		return x - math.Log1p(math.Exp(x))
	}
	return -math.Log1p(math.Exp(-x))
}

func refSigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// refSigmoidLoss is −(1−ε)·log σ(z) − ε·log σ(−z).
func refSigmoidLoss(z, eps float64) float64 {
	return -(1-eps)*refLogSigmoid(z) - eps*refLogSigmoid(-z)
}

// refSum is the masked sum of x (optionally minus ref) over one row; cnt is the mask's sum.
func refSum(x, ref, m []float64) (sum, cnt float64) {
	for j := range x {
		v := f32(x[j])
		if ref != nil {
			v -= f32(ref[j])
		}
		sum += v * m[j]
		cnt += m[j]
	}
	return sum, cnt
}

// refMean is Σ w·x / max(Σ w, 1).
func refMean(x, w []float64) float64 {
	var s, n float64
	for i := range x {
		s += w[i] * x[i]
		n += w[i]
	}
	return s / math.Max(n, 1)
}

// refRows holds per-row quantities of a prefCase.
type refRows struct {
	w                      []float64 // 1 for non-padding pairs
	sumC, sumR, avgC, avgR []float64 // policy log-probs, summed and length-averaged
	sumDC, sumDR           []float64 // policy − reference log-ratios, summed
	avgDC, avgDR           []float64 // and length-averaged
	nllSum, nllCnt         float64   // Σ −log p over all chosen tokens, and their number
}

func (pc prefCase) rows() refRows {
	var o refRows
	for i := range pc.c {
		sc, nc := refSum(pc.c[i], nil, pc.cm[i])
		sr, nr := refSum(pc.r[i], nil, pc.rm[i])
		o.sumC, o.sumR = append(o.sumC, sc), append(o.sumR, sr)
		o.avgC, o.avgR = append(o.avgC, sc/math.Max(nc, 1)), append(o.avgR, sr/math.Max(nr, 1))
		w := 0.0
		if nc+nr > 0 {
			w = 1
		}
		o.w = append(o.w, w)
		o.nllSum -= sc
		o.nllCnt += nc
		if pc.rc != nil {
			dc, _ := refSum(pc.c[i], pc.rc[i], pc.cm[i])
			dr, _ := refSum(pc.r[i], pc.rr[i], pc.rm[i])
			o.sumDC, o.sumDR = append(o.sumDC, dc), append(o.sumDR, dr)
			o.avgDC, o.avgDR = append(o.avgDC, dc/math.Max(nc, 1)), append(o.avgDR, dr/math.Max(nr, 1))
		}
	}
	return o
}

// refRewardMetrics mirrors prefRewardMetrics.
func refRewardMetrics(rc, rr, w []float64) map[string]float64 {
	margin, acc := make([]float64, len(rc)), make([]float64, len(rc))
	for i := range rc {
		margin[i] = rc[i] - rr[i]
		if margin[i] > 0 {
			acc[i] = 1
		}
	}
	return map[string]float64{
		"rewards/chosen": refMean(rc, w), "rewards/rejected": refMean(rr, w),
		"rewards/margin": refMean(margin, w), "rewards/accuracy": refMean(acc, w),
	}
}

func scaled(x []float64, s float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s
	}
	return out
}

// pairInputs builds a PrefPair from run1's inputs in prefCase order.
// Reference-free cases (rc, rr nil) leave RefChosen and RefRejected nil.
func pairInputs(in []*Node) PrefPair {
	p := PrefPair{Chosen: in[0], ChosenMask: in[1], Rejected: in[2], RejectedMask: in[3]}
	if len(in) == 6 {
		p.RefChosen, p.RefRejected = in[4], in[5]
	}
	return p
}

func (pc prefCase) inputs() [][][]float32 {
	in := [][][]float32{toF32(pc.c), toF32(pc.cm), toF32(pc.r), toF32(pc.rm)}
	if pc.rc != nil {
		in = append(in, toF32(pc.rc), toF32(pc.rr))
	}
	return in
}

// evalLoss runs a loss built from run1 inputs and returns its value and metrics.
func evalLoss(t *testing.T, build func(in []*Node) (*Node, Metrics), inputs ...[][]float32) (float64, map[string]float64) {
	t.Helper()
	var keys []string
	out := run1(t, func(in []*Node) []*Node {
		loss, m := build(in)
		keys = keys[:0]
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		nodes := []*Node{loss}
		for _, k := range keys {
			nodes = append(nodes, m[k])
		}
		return nodes
	}, inputs...)
	metrics := map[string]float64{}
	for i, k := range keys {
		metrics[k] = float64(out[i+1][0])
	}
	return float64(out[0][0]), metrics
}

// evalGrads runs a loss and returns d loss / d inputs[i] for each i in wrt, as [batch][seq].
func evalGrads(t *testing.T, build func(in []*Node) (*Node, Metrics), wrt []int, inputs ...[][]float32) [][][]float64 {
	t.Helper()
	out := run1(t, func(in []*Node) []*Node {
		loss, _ := build(in)
		nodes := make([]*Node, len(wrt))
		for i, k := range wrt {
			nodes[i] = in[k]
		}
		return Gradient(loss, nodes...)
	}, inputs...)
	grads := make([][][]float64, len(wrt))
	for i, k := range wrt {
		rows, cols := len(inputs[k]), len(inputs[k][0])
		grads[i] = make([][]float64, rows)
		for r := range rows {
			grads[i][r] = make([]float64, cols)
			for c := range cols {
				grads[i][r][c] = float64(out[i][r*cols+c])
			}
		}
	}
	return grads
}

func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

// checkLoss compares a loss and its metrics (the same key set) against the reference at 1e-5.
func checkLoss(t *testing.T, gotLoss float64, gotM map[string]float64, wantLoss float64, wantM map[string]float64) {
	t.Helper()
	if !near(gotLoss, wantLoss, 1e-5) {
		t.Errorf("loss = %.7g, want %.7g", gotLoss, wantLoss)
	}
	if len(gotM) != len(wantM) {
		t.Errorf("metrics %v, want keys of %v", gotM, wantM)
	}
	for k, want := range wantM {
		got, ok := gotM[k]
		if !ok {
			t.Errorf("metric %q missing", k)
			continue
		}
		if !near(got, want, 1e-5) {
			t.Errorf("metric %s = %.7g, want %.7g", k, got, want)
		}
	}
}

// numGrad is the central finite difference of a float64 reference loss with respect to x[i][j]. The
// step shrinks with |x[i][j]| so that log-probs near 0 (where ORPO's log-odds curve sharply) are not
// pushed past 0.
func numGrad(f func() float64, x [][]float64, i, j int) float64 {
	v := x[i][j]
	h := 1e-4 * math.Max(math.Min(1, math.Abs(v)), 1e-6)
	refRound = false
	defer func() { refRound = true }()
	x[i][j] = v + h
	up := f()
	x[i][j] = v - h
	down := f()
	x[i][j] = v
	return (up - down) / (2 * h)
}

// signOK reports whether grad has the sign of sign. Where the float64 reference gradient ref is
// below 1e-9 the loss is saturated and float32 may round the gradient to 0, which is then accepted.
func signOK(grad, sign, ref float64) bool {
	if math.Abs(ref) < 1e-9 {
		return grad*sign >= 0
	}
	return grad*sign > 0
}

// checkPairGrads checks d loss / d chosen and d loss / d rejected from autodiff: zero on masked
// tokens, the expected sign on counted ones (chosen < 0, rejected > 0; sign 0 skips the sign check),
// and agreement with the finite difference of the float64 reference ref.
func checkPairGrads(t *testing.T, pc prefCase, build func(in []*Node) (*Node, Metrics), ref func(prefCase) float64, signChosen, signRejected float64) {
	t.Helper()
	g := evalGrads(t, build, []int{0, 2}, pc.inputs()...)
	for side, s := range []struct {
		x, m [][]float64
		sign float64
		name string
	}{{pc.c, pc.cm, signChosen, "chosen"}, {pc.r, pc.rm, signRejected, "rejected"}} {
		for i := range s.x {
			for j := range s.x[i] {
				got := g[side][i][j]
				if math.IsNaN(got) || math.IsInf(got, 0) {
					t.Fatalf("d loss/d %s[%d][%d] = %v", s.name, i, j, got)
				}
				if s.m[i][j] == 0 {
					if got != 0 {
						t.Errorf("d loss/d %s[%d][%d] = %v on a masked token, want 0", s.name, i, j, got)
					}
					continue
				}
				want := numGrad(func() float64 { return ref(pc) }, s.x, i, j)
				if s.sign != 0 && !signOK(got, s.sign, want) {
					t.Errorf("d loss/d %s[%d][%d] = %v, want sign %v", s.name, i, j, got, s.sign)
				}
				if math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
					t.Errorf("d loss/d %s[%d][%d] = %.6g, finite difference %.6g", s.name, i, j, got, want)
				}
			}
		}
	}
}

// sgdStepPair models a policy whose per-token log-prob is log softmax([θ, 0])[0] = log σ(θ), with one
// free logit θ per token, takes one SGD step of size lr on loss, and returns the per-sequence policy
// log-probs of chosen and rejected before and after: [4][batch] (chosen before, after, rejected before,
// after). The reference log-probs are the initial policy's.
func sgdStepPair(t *testing.T, loss func(PrefPair) (*Node, Metrics), thetaC, thetaR, cm, rm [][]float64, lr float64) [][]float32 {
	t.Helper()
	return run1(t, func(in []*Node) []*Node {
		tc, tr, cmask, rmask := in[0], in[1], in[2], in[3]
		p := PrefPair{Chosen: LogSigmoid(tc), ChosenMask: cmask, Rejected: LogSigmoid(tr), RejectedMask: rmask,
			RefChosen: StopGradient(LogSigmoid(tc)), RefRejected: StopGradient(LogSigmoid(tr))}
		l, _ := loss(p)
		g := Gradient(l, tc, tr)
		tc2, tr2 := Sub(tc, MulScalar(g[0], lr)), Sub(tr, MulScalar(g[1], lr))
		return []*Node{SeqSum(LogSigmoid(tc), cmask), SeqSum(LogSigmoid(tc2), cmask),
			SeqSum(LogSigmoid(tr), rmask), SeqSum(LogSigmoid(tr2), rmask)}
	}, toF32(thetaC), toF32(thetaR), toF32(cm), toF32(rm))
}

// checkSGDPair runs sgdStepPair on a toy batch with a padding row and checks that every real pair's
// chosen log-prob rose and rejected log-prob fell.
func checkSGDPair(t *testing.T, loss func(PrefPair) (*Node, Metrics)) {
	t.Helper()
	thetaC := [][]float64{{0.5, -1, 2}, {-0.3, 0.1, 9}, {1, 1, 1}}
	thetaR := [][]float64{{1.5, 0.2}, {-2, 0.7}, {1, 1}}
	cm := [][]float64{{1, 1, 1}, {1, 1, 0}, {0, 0, 0}}
	rm := [][]float64{{1, 1}, {1, 0}, {0, 0}}
	out := sgdStepPair(t, loss, thetaC, thetaR, cm, rm, 0.5)
	for i := range 2 {
		if !(out[1][i] > out[0][i]) {
			t.Errorf("row %d: chosen log-prob %v → %v after one SGD step, want an increase", i, out[0][i], out[1][i])
		}
		if !(out[3][i] < out[2][i]) {
			t.Errorf("row %d: rejected log-prob %v → %v after one SGD step, want a decrease", i, out[2][i], out[3][i])
		}
	}
}
