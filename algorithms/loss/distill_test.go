package loss

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/testbackend"
)

// refLogSoftmax is log softmax(x/τ) in float64.
func refLogSoftmax(x []float64, tau float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v/tau)
	}
	var z float64
	for _, v := range x {
		z += math.Exp(v/tau - mx)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v/tau - mx - math.Log(z)
	}
	return out
}

func refKL(p, q []float64) float64 { // log-distributions
	var s float64
	for i := range p {
		s += math.Exp(p[i]) * (p[i] - q[i])
	}
	return s
}

// refDistill is the per-token divergence named by kind ("forward", "reverse", "jsd" with beta).
func refDistill(kind string, student, teacher []float64, beta, tau float64) float64 {
	s, t := refLogSoftmax(student, tau), refLogSoftmax(teacher, tau)
	switch {
	case kind == "forward" || (kind == "jsd" && beta == 0):
		return refKL(t, s)
	case kind == "reverse" || (kind == "jsd" && beta == 1):
		return refKL(s, t)
	}
	m := make([]float64, len(s))
	for i := range s {
		m[i] = math.Log(beta*math.Exp(t[i]) + (1-beta)*math.Exp(s[i]))
	}
	return beta*refKL(t, m) + (1-beta)*refKL(s, m)
}

// distillExec runs one divergence on [b, s, V] logits and a [b, s] mask.
func distillExec(t *testing.T, kind string, student, teacher [][][]float64, mask [][]float64, beta, tau float64) float64 {
	t.Helper()
	b, s, v := len(student), len(student[0]), len(student[0][0])
	flat3 := func(x [][][]float64) *tensors.Tensor {
		f := make([]float32, 0, b*s*v)
		for _, r := range x {
			for _, c := range r {
				for _, e := range c {
					f = append(f, float32(e))
				}
			}
		}
		return tensors.FromFlatDataAndDimensions(f, b, s, v)
	}
	m := make([]float32, 0, b*s)
	for _, r := range mask {
		for _, e := range r {
			m = append(m, float32(e))
		}
	}
	out := MustExecOnceN(testbackend.Sequential(), func(in []*Node) []*Node {
		var l *Node
		switch kind {
		case "forward":
			l, _ = DistillForwardKL(in[0], in[1], in[2], tau)
		case "reverse":
			l, _ = DistillReverseKL(in[0], in[1], in[2], tau)
		default:
			l, _ = DistillJSD(in[0], in[1], in[2], beta, tau)
		}
		return []*Node{l}
	}, flat3(student), flat3(teacher), tensors.FromFlatDataAndDimensions(m, b, s))
	return float64(tensors.MustCopyFlatData[float32](out[0])[0])
}

// TestDistillHandComputed: p_S = (½, ½), p_T = (¾, ¼) at τ = 1, worked out by hand.
func TestDistillHandComputed(t *testing.T) {
	student := [][][]float64{{{0, 0}}}
	teacher := [][][]float64{{{math.Log(3), 0}}}
	mask := [][]float64{{1}}
	for _, c := range []struct {
		kind string
		beta float64
		want float64
	}{
		// ¾·ln(¾/½) + ¼·ln(¼/½)
		{"forward", 0, 0.75*math.Log(1.5) + 0.25*math.Log(0.5)},
		// ½·ln(½/¾) + ½·ln(½/¼)
		{"reverse", 0, 0.5*math.Log(2.0/3) + 0.5*math.Log(2)},
		// M = (⅝, ⅜): ½·[¾·ln(¾/⅝) + ¼·ln(¼/⅜)] + ½·[½·ln(½/⅝) + ½·ln(½/⅜)]
		{"jsd", 0.5, 0.5*(0.75*math.Log(1.2)+0.25*math.Log(2.0/3)) + 0.5*(0.5*math.Log(0.8)+0.5*math.Log(4.0/3))},
	} {
		got := distillExec(t, c.kind, student, teacher, mask, c.beta, 1)
		if math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s β=%g: %.7f, want %.7f", c.kind, c.beta, got, c.want)
		}
	}
	if want := 0.130812; math.Abs(0.75*math.Log(1.5)+0.25*math.Log(0.5)-want) > 1e-6 {
		t.Fatalf("hand value drifted")
	}
}

// TestDistillMatchesReference: random logits, a mask with gaps, τ ∈ {1, 2}, every β; zero for
// identical distributions; τ² scaling.
func TestDistillMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b, s, v := 2, 3, 7
	gen := func(scale float64) [][][]float64 {
		x := make([][][]float64, b)
		for i := range x {
			x[i] = make([][]float64, s)
			for j := range x[i] {
				x[i][j] = make([]float64, v)
				for k := range x[i][j] {
					x[i][j][k] = rng.NormFloat64() * scale
				}
			}
		}
		return x
	}
	student, teacher := gen(1.5), gen(2)
	mask := [][]float64{{1, 1, 0}, {0, 1, 1}}
	for _, tau := range []float64{1, 2} {
		for _, c := range []struct {
			kind string
			beta float64
		}{{"forward", 0}, {"reverse", 0}, {"jsd", 0}, {"jsd", 0.1}, {"jsd", 0.5}, {"jsd", 0.9}, {"jsd", 1}} {
			var sum, n float64
			for i := range b {
				for j := range s {
					if mask[i][j] > 0 {
						sum += refDistill(c.kind, student[i][j], teacher[i][j], c.beta, tau)
						n++
					}
				}
			}
			want := tau * tau * sum / n
			got := distillExec(t, c.kind, student, teacher, mask, c.beta, tau)
			if math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Errorf("%s β=%g τ=%g: %.7f, want %.7f", c.kind, c.beta, tau, got, want)
			}
			if same := distillExec(t, c.kind, student, student, mask, c.beta, tau); math.Abs(same) > 1e-6 {
				t.Errorf("%s β=%g τ=%g: divergence of a distribution from itself = %g", c.kind, c.beta, tau, same)
			}
		}
	}
}

// TestDistillForwardKLGradient: at τ = 1 the gradient of KL(p_T ‖ p_S) with respect to the
// student's logits is (p_S − p_T) / (counted tokens), and nothing flows to the teacher.
func TestDistillForwardKLGradient(t *testing.T) {
	student := []float32{0.5, -1, 2, 0, 1, 1}
	teacher := []float32{1, 0, -1, 2, 0, 0.5}
	out := MustExecOnceN(testbackend.Sequential(), func(in []*Node) []*Node {
		l, _ := DistillForwardKL(in[0], in[1], OnesLike(Reshape(SliceAxis(in[0], -1, AxisRange(0, 1)), 1, 2)), 1)
		g := Gradient(l, in[0], in[1])
		return []*Node{g[0], g[1]}
	}, tensors.FromFlatDataAndDimensions(student, 1, 2, 3), tensors.FromFlatDataAndDimensions(teacher, 1, 2, 3))
	gs, gt := tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1])
	for pos := range 2 {
		ps := refLogSoftmax([]float64{float64(student[3*pos]), float64(student[3*pos+1]), float64(student[3*pos+2])}, 1)
		pt := refLogSoftmax([]float64{float64(teacher[3*pos]), float64(teacher[3*pos+1]), float64(teacher[3*pos+2])}, 1)
		for k := range 3 {
			want := (math.Exp(ps[k]) - math.Exp(pt[k])) / 2
			if got := float64(gs[3*pos+k]); math.Abs(got-want) > 1e-6 {
				t.Errorf("d/dstudent[%d,%d] = %g, want %g", pos, k, got, want)
			}
			if gt[3*pos+k] != 0 {
				t.Errorf("gradient reached the teacher: %g", gt[3*pos+k])
			}
		}
	}
}

// TestDistillForwardKLTopK: with k = vocab the top-k form equals the full forward KL; with k < vocab
// it is the forward KL against the teacher renormalised over its k tokens.
func TestDistillForwardKLTopK(t *testing.T) {
	student := []float64{0.3, -1.2, 2.0, 0.7, -0.1}
	teacher := []float64{1.1, 0.2, -0.5, 2.2, 0.0}
	tau := 2.0
	tl := refLogSoftmax(teacher, tau)
	sl := refLogSoftmax(student, tau)
	for _, ids := range [][]int32{{3, 0, 1, 4, 2}, {3, 0}} {
		lp := make([]float32, len(ids))
		for i, id := range ids {
			lp[i] = float32(tl[id])
		}
		// Reference: teacher renormalised over ids.
		var z float64
		for _, id := range ids {
			z += math.Exp(tl[id])
		}
		var want float64
		for _, id := range ids {
			q := math.Exp(tl[id]) / z
			want += q * (math.Log(q) - sl[id])
		}
		want *= tau * tau
		st := make([]float32, len(student))
		for i, x := range student {
			st[i] = float32(x)
		}
		out := MustExecOnceN(testbackend.Sequential(), func(in []*Node) []*Node {
			l, _ := DistillForwardKLTopK(in[0], in[1], in[2], OnesLike(Reshape(SliceAxis(in[0], -1, AxisRange(0, 1)), 1, 1)), tau)
			return []*Node{l}
		}, tensors.FromFlatDataAndDimensions(st, 1, 1, len(st)), tensors.FromFlatDataAndDimensions(ids, 1, 1, len(ids)),
			tensors.FromFlatDataAndDimensions(lp, 1, 1, len(lp)))
		got := float64(tensors.MustCopyFlatData[float32](out[0])[0])
		if math.Abs(got-want) > 1e-5 {
			t.Errorf("top-%d: %.7f, want %.7f", len(ids), got, want)
		}
		if len(ids) == len(student) {
			full := tau * tau * refKL(tl, sl)
			if math.Abs(got-full) > 1e-5 {
				t.Errorf("top-k over the whole vocab %.7f != full forward KL %.7f", got, full)
			}
		}
	}
}
