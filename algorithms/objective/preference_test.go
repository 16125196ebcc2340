package objective

import (
	"math"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/testbackend"
)

var toyCfg = model.Config{Family: modelcfg.FamilyLlama, Vocab: 37, DModel: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 8,
	FFN: 48, MaxSeq: 64, RopeTheta: 10000, NormEps: 1e-5, Activation: modelcfg.ActSiLU}

// side is one side of a toy batch laid out as the objective wants it, with its reference log-probs.
type side struct {
	PrefSide
	ref [][]float32
}

// layout puts prompt+completion rows right-padded to seq; a nil completion makes a padding row.
// Reference log-probs are arbitrary numbers on the counted positions.
func layout(prompts, completions [][]int32, seq int, refSeed float32) side {
	var s side
	for r := range prompts {
		full := append(append([]int32(nil), prompts[r]...), completions[r]...)
		if completions[r] == nil {
			full = nil
		}
		tok, pos := make([]int, seq), make([]int, seq)
		valid, mask, ref := make([]bool, seq), make([]float32, seq), make([]float32, seq)
		for t := range seq {
			pos[t] = t
			if t < len(full) {
				tok[t], valid[t] = int(full[t]), true
			}
			if t+1 < len(full) && t+1 >= len(prompts[r]) {
				mask[t] = 1
				ref[t] = -0.3 - 0.17*float32(t) - refSeed*float32(r+1)
			}
		}
		s.Tokens, s.Positions, s.Valid, s.Mask, s.ref = append(s.Tokens, tok), append(s.Positions, pos), append(s.Valid, valid), append(s.Mask, mask), append(s.ref, ref)
	}
	return s
}

// nextTokenRef scores a side the established way (model.NextTokenLogProbs on the full rows) and drops
// the last column, which has no next token: [rows, seq-1] log-probs, mask and reference.
func nextTokenRef(scope *gm.Scope, s sideNodes, ref *Node) (lp, m, r *Node) {
	seq := s.tokens.Shape().Dim(1)
	lp = model.NextTokenLogProbs(model.Forward(scope, toyCfg, s.tokens, s.positions, s.valid), s.tokens)
	cut := func(x *Node) *Node { return SliceAxis(x, 1, AxisRange(0, seq-1)) }
	return lp, cut(s.mask), cut(ref)
}

// TestPreferenceObjectiveMatchesLoss: the objective's loss and metrics equal algorithms/loss applied
// directly to log-probs computed independently (NextTokenLogProbs), for every kind, on a toy batch with
// prompts and completions of different lengths, a padding pair, and chosen/rejected sides of equal
// (one forward pass) and different lengths.
func TestPreferenceObjectiveMatchesLoss(t *testing.T) {
	store := gm.NewStore()
	if err := model.InitWeights(store.RootScope(), toyCfg, 1, 0.2); err != nil {
		t.Fatal(err)
	}
	prompts := [][]int32{{1, 5, 6, 7}, {1, 11}, {1, 20, 21}, {1, 3}}
	chosen := [][]int32{{8, 9, 2}, {12, 2}, {22, 23, 24, 2}, nil}
	rejected := [][]int32{{8, 10, 2}, {13, 14, 15, 2}, {25, 2}, nil}
	dpo := losscfg.DefaultPreference(losscfg.PrefDPO)
	dpoLS := dpo
	dpoLS.Beta, dpoLS.LabelSmoothing = 0.5, 0.1
	ipo := losscfg.DefaultPreference(losscfg.PrefIPO)
	ipoSum := ipo
	ipoSum.AverageLogProbs, ipoSum.Beta = false, 0.3
	orpo := losscfg.DefaultPreference(losscfg.PrefORPO)
	simpo := losscfg.DefaultPreference(losscfg.PrefSimPO)
	simpo.LabelSmoothing = 0.05
	kto := losscfg.DefaultPreference(losscfg.PrefKTO)
	kto.UndesirableWeight = 1.5
	cases := []struct {
		cfg        losscfg.Preference
		seqC, seqR int
		name       string
		wantInName string
		wantPairs  float64
	}{
		{dpo, 9, 9, "dpo", "beta=0.1", 3},
		{dpoLS, 9, 12, "dpo-smoothed-unequal", "label_smoothing=0.1", 3},
		{ipo, 9, 9, "ipo-avg", "average_log_probs=true", 3},
		{ipoSum, 10, 9, "ipo-sum-unequal", "beta=0.3", 3},
		{orpo, 9, 9, "orpo", "lambda=0.1", 3},
		{simpo, 8, 11, "simpo", "gamma_beta_ratio=0.5", 3},
		{kto, 9, 9, "kto", "undesirable_weight=1.5", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj, err := Preference(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(obj.Name, c.cfg.Kind) || !strings.Contains(obj.Name, c.wantInName) {
				t.Errorf("name %q lacks the kind or %q", obj.Name, c.wantInName)
			}
			cs := layout(prompts, chosen, c.seqC, 0.11)
			rs := layout(prompts, rejected, c.seqR, 0.07)
			var args []*tensors.Tensor
			var graphFn func(scope *gm.Scope, in []*Node) []*Node
			// vsRef: the objective's loss and metrics, then the reference's loss and metrics (the
			// objective's value where the reference has no such metric), then the reference's extras.
			vsRef := func(ref func(scope *gm.Scope, in []*Node) (*Node, map[string]*Node, []*Node)) func(*gm.Scope, []*Node) []*Node {
				return func(scope *gm.Scope, in []*Node) []*Node {
					l, m := obj.Build(scope, toyCfg, in)
					outs := []*Node{l}
					for _, name := range obj.Metrics {
						outs = append(outs, m[name])
					}
					rl, rm, extra := ref(scope, in)
					outs = append(outs, rl)
					for _, name := range obj.Metrics {
						if v, ok := rm[name]; ok {
							outs = append(outs, v)
						} else {
							outs = append(outs, m[name]) // the extras: compared below by value
						}
					}
					return append(outs, extra...)
				}
			}
			if c.cfg.Kind == losscfg.PrefKTO {
				// Rows: the chosen completions (desirable) then the rejected ones (undesirable); the KL
				// rows pair each prompt with the next row's completion.
				ps := append(append([][]int32{}, prompts...), prompts...)
				cs := append(append([][]int32{}, chosen...), rejected...)
				klc := append(append([][]int32{}, cs[1:]...), cs[0])
				main := layout(ps, cs, c.seqC, 0.09)
				kl := layout(ps, klc, c.seqC, 0.05)
				des := []float32{1, 1, 1, 1, 0, 0, 0, 0}
				args = KTOBatch{Rows: main.PrefSide, Ref: main.ref, Desirable: des, KL: kl.PrefSide, KLRef: kl.ref}.Tensors()
				graphFn = vsRef(func(scope *gm.Scope, in []*Node) (*Node, map[string]*Node, []*Node) {
					b := ktoIn(in)
					lp, mk, rf := nextTokenRef(scope, b.rows, b.ref)
					klp, klm, klr := nextTokenRef(scope, b.kl, b.klRef)
					rl, rm := loss.KTOLoss(c.cfg, loss.KTOBatch{LogProbs: lp, RefLogProbs: rf, Mask: mk, Desirable: b.desirable,
						KLLogProbs: klp, KLRefLogProbs: klr, KLMask: klm})
					return rl, rm, nil
				})
			} else {
				args = PrefBatch{Chosen: cs.PrefSide, Rejected: rs.PrefSide, RefChosen: cs.ref, RefRejected: rs.ref}.Tensors()
				graphFn = vsRef(func(scope *gm.Scope, in []*Node) (*Node, map[string]*Node, []*Node) {
					b := prefIn(c.cfg.Kind, in)
					lc, mc, rc := nextTokenRef(scope, b.chosen, b.refChosen)
					lr, mr, rr := nextTokenRef(scope, b.rejected, b.refRejected)
					rl, rm := loss.PairLoss(c.cfg, loss.PrefPair{Chosen: lc, ChosenMask: mc, Rejected: lr, RejectedMask: mr, RefChosen: rc, RefRejected: rr})
					// Per-sequence sums for the extras, in plain Go below.
					return rl, rm, []*Node{loss.SeqSum(lc, mc), loss.SeqSum(lr, mr)}
				})
			}
			anyArgs := make([]any, len(args))
			for i, a := range args {
				anyArgs[i] = a
			}
			outs, err := gm.CallOnceN(testbackend.Sequential(), store, graphFn, anyArgs...)
			if err != nil {
				t.Fatal(err)
			}
			n := 1 + len(obj.Metrics)
			val := func(i int) float64 { return float64(tensors.ToScalar[float32](outs[i])) }
			t.Logf("loss %.5f, %s %.5f", val(0), obj.Metrics[0], val(1))
			for i := 0; i < n; i++ {
				name := "loss"
				if i > 0 {
					name = obj.Metrics[i-1]
				}
				got, want := val(i), val(n+i)
				if math.IsNaN(got) || math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
					t.Errorf("%s: objective %v, algorithms/loss %v", name, got, want)
				}
			}
			if c.cfg.Kind == losscfg.PrefKTO {
				if got := val(1 + len(obj.Metrics) - 1); got != 6 {
					t.Errorf("rows = %v, want 6 (two padding rows)", got)
				}
				return
			}
			sc := tensors.MustCopyFlatData[float32](outs[2*n])
			sr := tensors.MustCopyFlatData[float32](outs[2*n+1])
			var wantC, wantR, wantAcc float64
			for i := 0; i < 3; i++ {
				wantC += float64(sc[i]) / 3
				wantR += float64(sr[i]) / 3
				if sc[i] > sr[i] {
					wantAcc += 1.0 / 3
				}
			}
			metric := func(name string) float64 {
				for i, m := range obj.Metrics {
					if m == name {
						return val(1 + i)
					}
				}
				t.Fatalf("no metric %s", name)
				return 0
			}
			for _, x := range []struct {
				name string
				want float64
			}{{MetricLogPChosen, wantC}, {MetricLogPRejected, wantR}, {MetricPrefAccuracy, wantAcc}, {MetricPairs, c.wantPairs}} {
				if got := metric(x.name); math.Abs(got-x.want) > 1e-5*(1+math.Abs(x.want)) {
					t.Errorf("%s = %v, want %v", x.name, got, x.want)
				}
			}
			if !(metric(MetricLogPChosen) < 0) {
				t.Errorf("logp/chosen = %v, want < 0", metric(MetricLogPChosen))
			}
		})
	}
}

// TestPreferenceRejectsBadConfig: an invalid loss config is an error, not a graph panic.
func TestPreferenceRejectsBadConfig(t *testing.T) {
	bad := losscfg.DefaultPreference("dop")
	if _, err := Preference(bad); err == nil || !strings.Contains(err.Error(), "dop") {
		t.Fatalf("want an error naming the kind, got %v", err)
	}
}
