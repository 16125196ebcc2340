package loss

import (
	"fmt"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

type ktoCase struct {
	name            string
	lp, ref, m      [][]float64 // labelled completions: policy, reference, mask
	des             []float64   // 1 desirable, 0 undesirable
	klp, klref, klm [][]float64 // mismatched pairs
}

var ktoCases = []ktoCase{
	{
		name: "neutral", // r = 0 everywhere and KL estimate 0
		lp:   [][]float64{{-1, -2}, {-0.5, -0.5}}, ref: [][]float64{{-1, -2}, {-0.5, -0.5}}, m: [][]float64{{1, 1}, {1, 1}},
		des: []float64{1, 0},
		klp: [][]float64{{-3, -1}, {-2, -2}}, klref: [][]float64{{-3, -1}, {-2, -2}}, klm: [][]float64{{1, 1}, {1, 1}},
	},
	{
		name:  "padded",
		lp:    [][]float64{{-0.7, -1.2, -99}, {-2.5, -0.1, -0.3}, {-0.4, -3.1, -9}, {-1, -1, -1}},
		ref:   [][]float64{{-0.9, -1.0, -5}, {-2.0, -0.2, -0.6}, {-0.5, -2.0, -3}, {-1.5, -0.5, -1}},
		m:     [][]float64{{1, 1, 0}, {0, 1, 1}, {1, 1, 0}, {1, 1, 1}},
		des:   []float64{1, 0, 0, 1},
		klp:   [][]float64{{-2, -3, -7, -7}, {-0.5, -0.2, -0.1, -50}, {-1, -2, -3, -4}, {-4, -4, -4, -4}},
		klref: [][]float64{{-2.5, -3.5, -1, -1}, {-0.6, -0.1, -0.3, -5}, {-1.2, -2.1, -2.9, -4}, {-4.1, -4, -4, -4}},
		klm:   [][]float64{{1, 1, 0, 0}, {1, 1, 1, 0}, {1, 1, 1, 1}, {1, 0, 0, 0}},
	},
	{
		name: "negative-kl", // the mismatched log-ratios average below 0: z0 = 0
		lp:   [][]float64{{-0.2, -0.4}, {-1.3, -0.8}, {-0.6, -0.9}}, ref: [][]float64{{-0.5, -0.5}, {-1, -1}, {-0.6, -0.6}},
		m: [][]float64{{1, 1}, {1, 1}, {1, 0}}, des: []float64{0, 1, 1},
		klp: [][]float64{{-5, -6}, {-4, -3}}, klref: [][]float64{{-1, -1}, {-2, -2}}, klm: [][]float64{{1, 1}, {1, 1}},
	},
	{
		name: "padding-rows", // a labelled row and a mismatched row with empty masks
		lp:   [][]float64{{-0.2, -0.4}, {-50, -60}, {-0.9, -0.1}}, ref: [][]float64{{-0.3, -0.6}, {-1, -2}, {-0.8, -0.4}},
		m: [][]float64{{1, 1}, {0, 0}, {1, 1}}, des: []float64{1, 0, 0},
		klp: [][]float64{{-1, -1}, {-9, -9}, {-1, -1}}, klref: [][]float64{{-1.4, -1.2}, {-1, -1}, {-1.1, -1}}, klm: [][]float64{{1, 1}, {0, 0}, {1, 0}},
	},
	{
		name: "all-desirable-large",
		lp:   [][]float64{{-0.01, -0.02}, {-40, -45}}, ref: [][]float64{{-20, -20}, {-1, -1}}, m: [][]float64{{1, 1}, {1, 1}},
		des: []float64{1, 1},
		klp: [][]float64{{-0.3, -0.3}, {-2, -2}}, klref: [][]float64{{-0.4, -0.4}, {-2, -2.5}}, klm: [][]float64{{1, 1}, {1, 1}},
	},
}

func refKTO(c ktoCase, beta, ld, lu float64) (float64, map[string]float64) {
	var kl, klw []float64
	for i := range c.klp {
		s, n := refSum(c.klp[i], c.klref[i], c.klm[i])
		kl = append(kl, s)
		klw = append(klw, math.Min(n, 1))
	}
	z0 := math.Max(0, refMean(kl, klw))
	var losses, w, rewards, wd, wu []float64
	for i := range c.lp {
		r, n := refSum(c.lp[i], c.ref[i], c.m[i])
		wi := math.Min(n, 1)
		l := lu * (1 - refSigmoid(beta*(z0-r)))
		if c.des[i] == 1 {
			l = ld * (1 - refSigmoid(beta*(r-z0)))
		}
		losses, w, rewards = append(losses, l), append(w, wi), append(rewards, beta*r)
		wd, wu = append(wd, wi*c.des[i]), append(wu, wi*(1-c.des[i]))
	}
	chosen, rejected := refMean(rewards, wd), refMean(rewards, wu)
	return refMean(losses, w), map[string]float64{
		"rewards/chosen": chosen, "rewards/rejected": rejected, "rewards/margin": chosen - rejected, "kl": z0,
	}
}

func (c ktoCase) inputs() [][][]float32 {
	return [][][]float32{toF32(c.lp), toF32(c.ref), toF32(c.m), toF32([][]float64{c.des}), toF32(c.klp), toF32(c.klref), toF32(c.klm)}
}

// ktoInputs builds a KTOBatch from run1's inputs; Desirable arrives as [1, batch] and is reshaped,
// optionally to Bool.
func ktoInputs(in []*Node, boolLabels bool) KTOBatch {
	d := Reshape(in[3], in[3].Shape().Dim(1))
	if boolLabels {
		d = GreaterThan(d, ZerosLike(d))
	}
	return KTOBatch{LogProbs: in[0], RefLogProbs: in[1], Mask: in[2], Desirable: d, KLLogProbs: in[4], KLRefLogProbs: in[5], KLMask: in[6]}
}

func TestKTOMatchesReference(t *testing.T) {
	for _, c := range ktoCases {
		for _, p := range []struct {
			beta, ld, lu float64
			boolLabels   bool
		}{{0.1, 1, 1, false}, {0.5, 1.33, 1, true}, {2, 1, 3, false}} {
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return KTO(ktoInputs(in, p.boolLabels), p.beta, p.ld, p.lu) }, c.inputs()...)
			want, wantM := refKTO(c, p.beta, p.ld, p.lu)
			t.Run(fmt.Sprintf("%s/β=%g,λD=%g,λU=%g,bool=%v", c.name, p.beta, p.ld, p.lu, p.boolLabels), func(t *testing.T) { checkLoss(t, got, gotM, want, wantM) })
		}
	}
}

func TestKTOHandComputed(t *testing.T) {
	// "neutral": r = 0 and z0 = 0, so each row loses λ·(1 − σ(0)) = λ/2: (λD + λU)/4 over the two rows.
	// A one-row batch with r = 2, z0 = max(0, −1) = 0, β = 0.5: desirable loss 1 − σ(1), undesirable 1 − σ(−1).
	one := ktoCase{lp: [][]float64{{1, 1}}, ref: [][]float64{{0, 0}}, m: [][]float64{{1, 1}}, des: []float64{1},
		klp: [][]float64{{-1}}, klref: [][]float64{{0}}, klm: [][]float64{{1}}}
	bad := one
	bad.des = []float64{0}
	// z0 = 2 (mismatched log-ratio +2) cancels r = 2: loss λ/2.
	shifted := one
	shifted.klp = [][]float64{{2}}
	cases := []struct {
		name         string
		c            ktoCase
		beta, ld, lu float64
		want, kl     float64
	}{
		{"neutral", ktoCases[0], 0.1, 1, 1, 0.5, 0},
		{"neutral weighted", ktoCases[0], 0.1, 1.5, 0.5, 0.5, 0},
		{"desirable r=2", one, 0.5, 1, 1, 1 - 1/(1+math.Exp(-1)), 0},
		{"undesirable r=2", bad, 0.5, 1, 2, 2 * (1 - 1/(1+math.Exp(1))), 0},
		{"z0=r", shifted, 0.5, 3, 1, 1.5, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wantM := refKTO(c.c, c.beta, c.ld, c.lu)
			if !near(want, c.want, 1e-12) || wantM["kl"] != c.kl {
				t.Fatalf("reference %v %v, hand %v kl %v", want, wantM, c.want, c.kl)
			}
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return KTO(ktoInputs(in, false), c.beta, c.ld, c.lu) }, c.c.inputs()...)
			checkLoss(t, got, gotM, c.want, wantM)
		})
	}
}

// TestKTOGradients: desirable rows have d loss / d log-prob < 0 (SGD raises them), undesirable rows
// > 0 (or 0 where the sigmoid saturates in float32, as on the large case's second row, r ≈ −83); masked tokens and padding rows get 0; the mismatched pairs get no gradient at all (z0 is a
// constant); and the gradient matches the finite difference of the reference.
func TestKTOGradients(t *testing.T) {
	for _, c := range ktoCases {
		t.Run(c.name, func(t *testing.T) {
			build := func(in []*Node) (*Node, Metrics) { return KTO(ktoInputs(in, false), 0.5, 1.33, 1) }
			g := evalGrads(t, build, []int{0, 1, 4, 5}, c.inputs()...)
			for i := range c.lp {
				for j := range c.lp[i] {
					got := g[0][i][j]
					if c.m[i][j] == 0 {
						if got != 0 {
							t.Errorf("d loss/d logp[%d][%d] = %v on a masked token, want 0", i, j, got)
						}
						continue
					}
					want := numGrad(func() float64 { l, _ := refKTO(c, 0.5, 1.33, 1); return l }, c.lp, i, j)
					if !signOK(got, 1-2*c.des[i], want) {
						t.Errorf("d loss/d logp[%d][%d] = %v, desirable=%v", i, j, got, c.des[i])
					}
					if gr := g[1][i][j]; gr != -got {
						t.Errorf("d loss/d ref[%d][%d] = %v, want %v", i, j, gr, -got)
					}
					if math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
						t.Errorf("d loss/d logp[%d][%d] = %.6g, finite difference %.6g", i, j, got, want)
					}
				}
			}
			for k := 2; k < 4; k++ {
				for i, row := range g[k] {
					for j, v := range row {
						if v != 0 {
							t.Errorf("gradient %v reaches mismatched-pair input %d at [%d][%d]", v, k, i, j)
						}
					}
				}
			}
		})
	}
}

// TestKTOSGDStep: per-token log-prob log σ(θ) (a two-way softmax over free logits [θ, 0]); the
// mismatched pairs are the same policy on rows rolled by one, without StopGradient, so KTO's own
// StopGradient is what keeps them out of the update. One SGD step raises desirable completions and
// lowers undesirable ones.
func TestKTOSGDStep(t *testing.T) {
	theta := [][]float64{{0.5, -1, 2}, {-0.3, 0.1, 9}, {1, -2, 0.3}, {0.2, 0.2, 0.2}}
	mask := [][]float64{{1, 1, 1}, {1, 1, 0}, {1, 0, 0}, {1, 1, 1}}
	des := []float64{1, 0, 1, 0}
	out := run1(t, func(in []*Node) []*Node {
		th, m, d := in[0], in[1], Reshape(in[2], 4)
		roll := func(x *Node) *Node {
			return Concatenate([]*Node{SliceAxis(x, 0, AxisRange(1, 4)), SliceAxis(x, 0, AxisRange(0, 1))}, 0)
		}
		ref := StopGradient(AddScalar(LogSigmoid(th), -0.1)) // r starts at 0.1 per token, so z0 > 0
		b := KTOBatch{LogProbs: LogSigmoid(th), RefLogProbs: ref, Mask: m, Desirable: d,
			KLLogProbs: roll(LogSigmoid(th)), KLRefLogProbs: roll(ref), KLMask: roll(m)}
		l, metrics := KTO(b, 0.1, 1, 1)
		th2 := Sub(th, MulScalar(Gradient(l, th)[0], 0.5))
		return []*Node{SeqSum(LogSigmoid(th), m), SeqSum(LogSigmoid(th2), m), metrics["kl"]}
	}, toF32(theta), toF32(mask), toF32([][]float64{des}))
	if out[2][0] <= 0 {
		t.Errorf("kl = %v, want > 0 so that z0 is exercised", out[2][0])
	}
	for i := range des {
		before, after := out[0][i], out[1][i]
		if des[i] == 1 && !(after > before) {
			t.Errorf("desirable row %d: log-prob %v → %v, want an increase", i, before, after)
		}
		if des[i] == 0 && !(after < before) {
			t.Errorf("undesirable row %d: log-prob %v → %v, want a decrease", i, before, after)
		}
	}
}

func TestPreferenceKTOLoss(t *testing.T) {
	c := ktoCases[1]
	cfg := losscfg.DefaultPreference(losscfg.PrefKTO)
	cfg.DesirableWeight = 1.33
	got, _ := evalLoss(t, func(in []*Node) (*Node, Metrics) { return KTOLoss(cfg, ktoInputs(in, false)) }, c.inputs()...)
	want, _ := refKTO(c, 0.1, 1.33, 1)
	if !near(got, want, 1e-5) {
		t.Errorf("KTOLoss = %v, want %v", got, want)
	}
}
