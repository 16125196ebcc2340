package objective

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/testbackend"
)

// prmRef is the plain-Go float64 reference of StepLogits and StepBCE: values [rows][seq] read at
// ends [rows][steps], binary cross-entropy against labels, each step weighted by w and by its
// class's weight (cCorrect on label 1, cWrong on label 0), summed over Σ w.
func prmRef(values [][]float64, ends [][]int, labels, w [][]float64, cCorrect, cWrong float64) (float64, map[string]float64) {
	var n, l, plain, acc, score, pos float64
	for r := range ends {
		for s, e := range ends[r] {
			z, y := values[r][e], labels[r][s]
			// −log σ(z) = log(1 + e^{−z}) and −log σ(−z) = log(1 + e^{z}), written stably.
			nlsPos := math.Max(-z, 0) + math.Log1p(math.Exp(-math.Abs(z)))
			nlsNeg := math.Max(z, 0) + math.Log1p(math.Exp(-math.Abs(z)))
			c := cWrong
			if y == 1 {
				c = cCorrect
			}
			l += w[r][s] * c * (y*nlsPos + (1-y)*nlsNeg)
			plain += w[r][s] * (y*nlsPos + (1-y)*nlsNeg)
			if (z > 0) == (y == 1) {
				acc += w[r][s]
			}
			score += w[r][s] * z
			pos += w[r][s] * y
			n += w[r][s]
		}
	}
	den := math.Max(n, 1e-9)
	return l / den, map[string]float64{"step_accuracy": acc / den, "bce": plain / den, "score": score / den, "positive": pos / den, "steps": n}
}

func mat32(x [][]float64) *tensors.Tensor {
	flat := make([]float32, 0, len(x)*len(x[0]))
	for _, row := range x {
		for _, v := range row {
			flat = append(flat, float32(v))
		}
	}
	return tensors.FromFlatDataAndDimensions(flat, len(x), len(x[0]))
}

// TestStepBCEMatchesReference: the graph's step logits, loss and metrics against prmRef on
// hand-made cases (a confident right step, a confident wrong one, a padding step whose huge logit
// must not count, a row of padding only), and the gradient of the loss in the values against
// σ(z) − y per step over Σ w, placed at the step's end.
func TestStepBCEMatchesReference(t *testing.T) {
	cases := []struct {
		name         string
		values       [][]float64
		ends         [][]int
		labels, w    [][]float64
		cw           ClassWeights
		wantLoss     float64 // hand-computed
		wantAccuracy float64
	}{
		{
			name:   "one step right",
			values: [][]float64{{0, 0, 2}}, ends: [][]int{{2}}, labels: [][]float64{{1}}, w: [][]float64{{1}},
			wantLoss: math.Log1p(math.Exp(-2)), wantAccuracy: 1,
		},
		{
			name:   "wrong step scored high, right step scored low",
			values: [][]float64{{0, 3, 0, -1}}, ends: [][]int{{1, 3}}, labels: [][]float64{{0, 1}}, w: [][]float64{{1, 1}},
			wantLoss: (math.Log1p(math.Exp(3)) + math.Log1p(math.Exp(1))) / 2, wantAccuracy: 0,
		},
		{
			name:   "a zero logit says wrong",
			values: [][]float64{{5, 0}}, ends: [][]int{{1}}, labels: [][]float64{{0}}, w: [][]float64{{1}},
			wantLoss: math.Log(2), wantAccuracy: 1,
		},
		{
			name:   "padding step and padding row do not count",
			values: [][]float64{{-2, 50, 0}, {9, 9, 9}}, ends: [][]int{{0, 1}, {0, 0}}, labels: [][]float64{{0, 0}, {1, 1}}, w: [][]float64{{1, 0}, {0, 0}},
			wantLoss: math.Log1p(math.Exp(-2)), wantAccuracy: 1,
		},
		{
			name:   "class weights: a right step weighs 3, a wrong one 0.6",
			values: [][]float64{{0, 3, 0, -1}}, ends: [][]int{{1, 3}}, labels: [][]float64{{0, 1}}, w: [][]float64{{1, 1}}, cw: ClassWeights{Correct: 3, Wrong: 0.6},
			wantLoss: (0.6*math.Log1p(math.Exp(3)) + 3*math.Log1p(math.Exp(1))) / 2, wantAccuracy: 0,
		},
		{
			name:   "balanced weights of one right step and three wrong ones",
			values: [][]float64{{2, -1, 1, -3}}, ends: [][]int{{0, 1, 2, 3}}, labels: [][]float64{{1, 0, 0, 0}}, w: [][]float64{{1, 1, 1, 1}}, cw: BalancedWeights(1, 4),
			wantLoss: (2*math.Log1p(math.Exp(-2)) + 2.0/3*(math.Log1p(math.Exp(-1))+math.Log1p(math.Exp(1))+math.Log1p(math.Exp(-3)))) / 4, wantAccuracy: 0.75,
		},
		{
			name:   "class weights skip padding",
			values: [][]float64{{-2, 50, 0}, {9, 9, 9}}, ends: [][]int{{0, 1}, {0, 0}}, labels: [][]float64{{0, 1}, {1, 1}}, w: [][]float64{{1, 0}, {0, 0}}, cw: ClassWeights{Correct: 5, Wrong: 0.5},
			wantLoss: 0.5 * math.Log1p(math.Exp(-2)), wantAccuracy: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cw := c.cw.resolved()
			ref, refM := prmRef(c.values, c.ends, c.labels, c.w, cw.Correct, cw.Wrong)
			if math.Abs(ref-c.wantLoss) > 1e-12 || refM["step_accuracy"] != c.wantAccuracy {
				t.Fatalf("reference %g (accuracy %g), hand-computed %g (%g)", ref, refM["step_accuracy"], c.wantLoss, c.wantAccuracy)
			}
			flat := []int32{}
			for r := range c.ends {
				for _, e := range c.ends[r] {
					flat = append(flat, int32(e))
				}
			}
			outs := MustExecOnceN(testbackend.Sequential(), func(in []*Node) []*Node {
				l, m := StepBCE(StepLogits(in[0], in[1]), in[2], in[3], c.cw)
				nodes := []*Node{l, Gradient(l, in[0])[0]}
				for _, k := range PRMMetrics {
					nodes = append(nodes, m[k])
				}
				return nodes
			}, mat32(c.values), tensors.FromFlatDataAndDimensions(flat, len(c.ends), len(c.ends[0])), mat32(c.labels), mat32(c.w))
			if got := float64(tensors.ToScalar[float32](outs[0])); math.Abs(got-ref) > 1e-5 {
				t.Errorf("loss %g, reference %g", got, ref)
			}
			for i, k := range PRMMetrics {
				if got := float64(tensors.ToScalar[float32](outs[2+i])); math.Abs(got-refM[k]) > 1e-5 {
					t.Errorf("%s %g, reference %g", k, got, refM[k])
				}
			}
			// d loss / d values[r][e] = Σ over steps ending at e of w·c(y)·(σ(z) − y) / Σ w.
			var n float64
			for r := range c.w {
				for _, v := range c.w[r] {
					n += v
				}
			}
			grad := tensors.MustCopyFlatData[float32](outs[1])
			seq := len(c.values[0])
			for r := range c.values {
				want := make([]float64, seq)
				for s, e := range c.ends[r] {
					z := c.values[r][e]
					cy := cw.Wrong
					if c.labels[r][s] == 1 {
						cy = cw.Correct
					}
					want[e] += c.w[r][s] * cy * (1/(1+math.Exp(-z)) - c.labels[r][s]) / math.Max(n, 1e-9)
				}
				for p := range seq {
					if got := float64(grad[r*seq+p]); math.Abs(got-want[p]) > 1e-5 {
						t.Errorf("d loss / d values[%d][%d] = %g, want %g", r, p, got, want[p])
					}
				}
			}
		})
	}
}

// TestBalancedWeights: total/(2·count) per class on hand-computed counts, the plain mean for a
// one-class or already balanced set, and the objective's name (its compile key) changes with the
// weights only when they are not the plain mean.
func TestBalancedWeights(t *testing.T) {
	for _, c := range []struct {
		correct, total int
		want           ClassWeights
	}{
		{1, 4, ClassWeights{Correct: 2, Wrong: 4.0 / 6}},
		{30, 366, ClassWeights{Correct: 366.0 / 60, Wrong: 366.0 / 672}},
		{5, 10, ClassWeights{Correct: 1, Wrong: 1}},
		{0, 5, ClassWeights{}},
		{5, 5, ClassWeights{}},
	} {
		got := BalancedWeights(c.correct, c.total)
		if math.Abs(got.Correct-c.want.Correct) > 1e-12 || math.Abs(got.Wrong-c.want.Wrong) > 1e-12 {
			t.Errorf("BalancedWeights(%d, %d) = %+v, want %+v", c.correct, c.total, got, c.want)
		}
		// Each class carries half of the weight: correct·Correct = (total−correct)·Wrong = total/2.
		if r := got.resolved(); c.correct > 0 && c.correct < c.total &&
			(math.Abs(float64(c.correct)*r.Correct-float64(c.total)/2) > 1e-9 || math.Abs(float64(c.total-c.correct)*r.Wrong-float64(c.total)/2) > 1e-9) {
			t.Errorf("BalancedWeights(%d, %d) = %+v: the classes do not carry half each", c.correct, c.total, got)
		}
	}
	for _, c := range []struct {
		cw   ClassWeights
		name string
	}{
		{ClassWeights{}, "prm-bce"},
		{ClassWeights{Correct: 1, Wrong: 1}, "prm-bce"},
		{ClassWeights{Correct: 2, Wrong: 0.5}, "prm-bce[correct=2 wrong=0.5]"},
		{ClassWeights{Correct: 2}, "prm-bce[correct=2 wrong=1]"},
	} {
		if got := PRM(c.cw).Name; got != c.name {
			t.Errorf("PRM(%+v).Name = %q, want %q", c.cw, got, c.name)
		}
	}
}

// stepLogProbsRef is the plain-Go reference of StepLogProbs: token t's log-prob is logp[t−1]; step
// s sums the tokens after step s−1's end up to its own end where completion is 1.
func stepLogProbsRef(logp, completion [][]float64, ends [][]int) [][]float64 {
	out := make([][]float64, len(ends))
	for r := range ends {
		out[r] = make([]float64, len(ends[r]))
		lo := 0
		for s, e := range ends[r] {
			for t := max(lo, 1); t <= e; t++ {
				out[r][s] += completion[r][t] * logp[r][t-1]
			}
			lo = max(lo, e+1)
		}
	}
	return out
}

// TestStepLogProbsMatchesReference: each step's summed log-probs on hand-computed cases whose
// log-probs are distinct powers of two, so a shift by one token, a step taking its neighbour's
// tokens or the prompt's, or a padding step counting anything, changes the sums.
func TestStepLogProbsMatchesReference(t *testing.T) {
	cases := []struct {
		name       string
		logp       [][]float64 // [rows][seq-1]
		completion [][]float64 // [rows][seq]
		ends       [][]int
		want       [][]float64
	}{
		{
			// prompt at 0-1, step 0 at 2-3, step 1 at 4-5: token t's log-prob is logp[t-1].
			name: "two steps after a prompt", logp: [][]float64{{-1, -2, -4, -8, -16}},
			completion: [][]float64{{0, 0, 1, 1, 1, 1}}, ends: [][]int{{3, 5}},
			want: [][]float64{{-2 - 4, -8 - 16}},
		},
		{
			// row 0: one real step and a padding step (end 0) that must sum nothing; row 1: a one-token
			// prompt, then steps of one and three tokens, followed by padding the steps do not reach.
			name:       "padding steps and a short row",
			logp:       [][]float64{{-1, -2, -4, -8, -16}, {-32, -64, -128, -256, -512}},
			completion: [][]float64{{0, 0, 0, 1, 1, 0}, {0, 1, 1, 1, 1, 0}}, ends: [][]int{{4, 0}, {1, 4}},
			want: [][]float64{{-4 - 8, 0}, {-32, -64 - 128 - 256}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := stepLogProbsRef(c.logp, c.completion, c.ends)
			for r := range c.want {
				for s := range c.want[r] {
					if ref[r][s] != c.want[r][s] {
						t.Fatalf("reference [%d][%d] = %g, hand-computed %g", r, s, ref[r][s], c.want[r][s])
					}
				}
			}
			flat := []int32{}
			for r := range c.ends {
				for _, e := range c.ends[r] {
					flat = append(flat, int32(e))
				}
			}
			out := MustExecOnce(testbackend.Sequential(), func(logp, completion, ends *Node) *Node {
				return StepLogProbs(logp, completion, ends)
			}, mat32(c.logp), mat32(c.completion), tensors.FromFlatDataAndDimensions(flat, len(c.ends), len(c.ends[0])))
			got := tensors.MustCopyFlatData[float32](out)
			for r := range c.want {
				for s := range c.want[r] {
					if g := float64(got[r*len(c.want[r])+s]); math.Abs(g-c.want[r][s]) > 1e-4 {
						t.Errorf("step [%d][%d] = %g, want %g", r, s, g, c.want[r][s])
					}
				}
			}
		})
	}
}
