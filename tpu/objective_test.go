package tpu

import (
	"math"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
)

// ceObjective is TrainStep's loss written as an Objective; its batch is a ceBatch.
var ceObjective = objective.Objective{
	Name:    "ce",
	Metrics: []string{"tokens"},
	Build: func(scope *gm.Scope, cfg model.Config, in []*Node) (*Node, map[string]*Node) {
		tokens, targets, mask, positions, valid := in[0], in[1], in[2], in[3], in[4]
		logits := model.Forward(scope, cfg, tokens, positions, valid)
		return model.CrossEntropy(logits, targets, mask), map[string]*Node{"tokens": ReduceAllSum(mask)}
	},
}

// ceBatch is ceObjective's batch: a token batch whose every target counts and every key is valid,
// laid out as tokens, targets [b,t] int32, mask [b,t] float32, positions [b,t] int32, valid [b,t] bool.
type ceBatch data.TokenBatch

func (b ceBatch) Tensors() []*tensors.Tensor {
	n, t := data.TokenBatch(b).Dims()
	i32 := func(x [][]int) *tensors.Tensor {
		flat := make([]int32, 0, n*t)
		for _, row := range x {
			for _, v := range row {
				flat = append(flat, int32(v))
			}
		}
		return tensors.FromFlatDataAndDimensions(flat, n, t)
	}
	mask := make([]float32, 0, n*t)
	valid := make([]bool, 0, n*t)
	for r := 0; r < n; r++ {
		for c := 0; c < t; c++ {
			mask = append(mask, 1)
			valid = append(valid, true)
		}
	}
	return []*tensors.Tensor{i32(b.Tokens), i32(b.Targets), tensors.FromFlatDataAndDimensions(mask, n, t),
		i32(b.Positions), tensors.FromFlatDataAndDimensions(valid, n, t)}
}

// policyRows is a token batch as policy-objective rows: every target trained, the given old,
// behaviour and reference log-probs.
func policyRows(b data.TokenBatch, mask, old, behaviour, ref [][]float32) objective.PolicyRows {
	n, t := b.Dims()
	valid := make([][]bool, n)
	for r := range valid {
		valid[r] = make([]bool, t)
		for c := range valid[r] {
			valid[r][c] = true
		}
	}
	if mask == nil {
		mask = make([][]float32, n)
		for r := range mask {
			mask[r] = make([]float32, t)
			for c := range mask[r] {
				mask[r][c] = 1
			}
		}
	}
	return objective.PolicyRows{Tokens: b.Tokens, Targets: b.Targets, Positions: b.Positions, Valid: valid, Mask: mask,
		Old: old, Behaviour: behaviour, Ref: ref}
}

// TestObjectiveMatchesTrainStep: the same loss through StepObjective gives the same weights as TrainStep.
func TestObjectiveMatchesTrainStep(t *testing.T) {
	a := newRuntime(t, Options{Seed: 3})
	b := newRuntime(t, Options{Seed: 3})
	batch := randomBatch(t, tinyCfg().Vocab, 2, 8, 5)
	for i := 0; i < 3; i++ {
		ma, err := a.TrainStep(batch, 1e-2)
		if err != nil {
			t.Fatal(err)
		}
		mb, err := b.StepObjective(ceObjective, ceBatch(batch), 1e-2)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(ma.Loss-mb["loss"])) > 1e-6 || math.Abs(float64(ma.GradNorm-mb["grad_norm"])) > 1e-5 || mb["tokens"] != 16 {
			t.Fatalf("step %d: TrainStep %+v, objective %v", i, ma, mb)
		}
	}
	if d := bitsEqual(exportWeights(t, a), exportWeights(t, b)); d != "" {
		t.Fatalf("weights differ at %s", d)
	}
	ev, err := b.EvalObjective(ceObjective, ceBatch(batch))
	if err != nil || !(ev["loss"] > 0) {
		t.Fatalf("eval: %v %v", ev, err)
	}
	// A scalar-less objective is an error, not a crash.
	bad := objective.Objective{Name: "bad", Build: func(scope *gm.Scope, cfg model.Config, in []*Node) (*Node, map[string]*Node) {
		return model.Forward(scope, cfg, in[0], in[3], in[4]), nil
	}}
	if _, err := b.StepObjective(bad, ceBatch(batch), 1e-2); err == nil {
		t.Fatal("want an error for a non-scalar loss")
	}
}

// TestObjectiveBadBatch: a batch of another objective, a ragged batch and no batch are errors that
// say what is wrong, not crashes, and change nothing.
func TestObjectiveBadBatch(t *testing.T) {
	r := newRuntime(t, Options{Seed: 3})
	batch := randomBatch(t, tinyCfg().Vocab, 2, 8, 5)
	before := exportWeights(t, r)
	ragged := objective.Sequences{Tokens: [][]int{{1, 2}, {3}}, Positions: [][]int{{0, 1}, {0}}, Valid: [][]bool{{true, true}, {true}},
		Last: []int{1, 0}, Completion: [][]float32{{0, 1}, {0}}}
	for _, c := range []struct {
		name string
		obj  objective.Objective
		b    objective.Batch
		want string
	}{
		{"another objective's batch", objective.Policy(losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)), ceBatch(batch), "PolicyBatch"},
		{"ragged", objective.RewardScores(2), ragged, "batch objective.Sequences"},
		{"none", ceObjective, nil, "no batch"},
	} {
		if _, err := r.StepObjective(c.obj, c.b, 1e-2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if d := bitsEqual(before, exportWeights(t, r)); d != "" {
		t.Fatalf("a refused step changed %s", d)
	}
}

// TestPolicyOnPolicyMatchesRecomputedOld: one on-policy step of the policy objective, π_old taken in
// the graph (objective.PolicyOptions.OnPolicy), moves the weights as the step given π_old recomputed by a
// separate LogProbs pass (objective.Policy), to rounding; what the trainer's one-epoch,
// one-minibatch shortcut relies on. Positive and negative advantages, GRPO's clip range.
func TestPolicyOnPolicyMatchesRecomputedOld(t *testing.T) {
	a := newRuntime(t, Options{Seed: 5})
	b := newRuntime(t, Options{Seed: 5})
	batch := randomBatch(t, tinyCfg().Vocab, 4, 8, 7)
	n, seq := batch.Dims()
	cfg := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
	old, err := a.LogProbs(batch)
	if err != nil {
		t.Fatal(err)
	}
	zero := make([][]float32, n)
	for r := range zero {
		zero[r] = make([]float32, seq)
	}
	policyIn := func(prev, ref [][]float32) objective.PolicyBatch {
		return objective.PolicyBatch{PolicyRows: policyRows(batch, nil, prev, prev, ref), Adv: []float32{1.5, -0.5, 0.25, -1.25}}
	}
	before := exportWeights(t, a)
	ma, err := a.StepObjective(objective.Policy(cfg), policyIn(old, old), 1e-2)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := b.StepObjective(objective.PolicyWith(cfg, objective.PolicyOptions{OnPolicy: true}), policyIn(zero, old) /* KL: a separate reference */, 1e-2)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(ma["loss"]-mb["loss"])) > 1e-5 || math.Abs(float64(ma["grad_norm"]-mb["grad_norm"]))/float64(ma["grad_norm"]) > 1e-4 {
		t.Fatalf("recomputed old: %v; on-policy: %v", ma, mb)
	}
	if mb["ratio_mean"] != 1 || mb["clip_frac_low"] != 0 || mb["clip_frac_high"] != 0 {
		t.Fatalf("on-policy step: ratio %v, clipped %v/%v: want exactly 1 and none", mb["ratio_mean"], mb["clip_frac_low"], mb["clip_frac_high"])
	}
	sameStep(t, before, exportWeights(t, a), exportWeights(t, b), "recomputed old", "on-policy")
}

// TestPolicyWindowMatchesFullRows: the policy objective computed at each row's completion columns
// only (objective.PolicyOptions.Window) gives the loss, metrics and weights of the one computed at
// every column, to rounding: completions of different lengths at different columns, one column in
// a completion that is not trained (mask 0, an episode's tool result), KL and TIS on.
func TestPolicyWindowMatchesFullRows(t *testing.T) {
	batch := randomBatch(t, tinyCfg().Vocab, 4, 8, 11)
	n, seq := batch.Dims()
	cols := [][]int{{5, 6, 7}, {3, 4}, {4, 5, 6}, {2, 3, 4, 5}}
	untrained := [2]int{2, 5} // row 2, column 5
	mask := make([][]float32, n)
	for r, cs := range cols {
		mask[r] = make([]float32, seq)
		for _, c := range cs {
			if [2]int{r, c} != untrained {
				mask[r][c] = 1
			}
		}
	}
	vals := func(scale float32) [][]float32 { // log-prob-like inputs, different at every column
		x := make([][]float32, n)
		for r := range x {
			x[r] = make([]float32, seq)
			for c := range x[r] {
				x[r][c] = -scale * float32(1+(r*seq+c)%7)
			}
		}
		return x
	}
	cfg := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
	cfg.KLBeta, cfg.TISThreshold = 0.05, 2
	inputs := func(window bool) objective.PolicyBatch {
		b := objective.PolicyBatch{PolicyRows: policyRows(batch, mask, vals(0.5), vals(0.45), vals(0.55)), Adv: []float32{1.5, -0.5, 0.25, -1.25}}
		if window {
			b.Cols, b.Window = cols, 4
		}
		return b
	}
	a := newRuntime(t, Options{Seed: 5})
	b := newRuntime(t, Options{Seed: 5})
	before := exportWeights(t, a)
	ma, err := a.StepObjective(objective.Policy(cfg), inputs(false), 1e-2)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := b.StepObjective(objective.PolicyWith(cfg, objective.PolicyOptions{Window: 4}), inputs(true), 1e-2)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append([]string{"loss", "grad_norm"}, objective.PolicyMetrics...) {
		if d := math.Abs(float64(ma[k] - mb[k])); d > 1e-5*math.Max(1, math.Abs(float64(ma[k]))) {
			t.Errorf("%s: full rows %v, window %v", k, ma[k], mb[k])
		}
	}
	if ma["tokens"] != 11 || ma["clip_frac_low"]+ma["clip_frac_high"] == 0 || ma["kl"] == 0 {
		t.Fatalf("metrics %v: want 11 tokens, some clipping and a KL term, or the comparison proves little", ma)
	}
	sameStep(t, before, exportWeights(t, a), exportWeights(t, b), "full rows", "window")
}

// sameStep fails unless weights a and b (one step from before each, by the ways named x and y) agree
// to 1e-6 and the step moved some weight by 1e-3 (else the comparison proves nothing).
func sameStep(t *testing.T, before, a, b map[string][]float32, x, y string) {
	t.Helper()
	moved := 0.0
	for k, w := range a {
		for i := range w {
			if d := math.Abs(float64(w[i] - b[k][i])); d > 1e-6 {
				t.Fatalf("%s[%d]: %s %v, %s %v", k, i, x, w[i], y, b[k][i])
			}
			moved = math.Max(moved, math.Abs(float64(w[i]-before[k][i])))
		}
	}
	if moved < 1e-3 {
		t.Fatalf("the step moved no weight by more than %g: the comparison proves nothing", moved)
	}
}
