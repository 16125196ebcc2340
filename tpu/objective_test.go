package tpu

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
)

// ceObjective is TrainStep's loss written as an Objective; inputs: tokens, targets [b,t] int32,
// mask [b,t] float32, positions [b,t] int32, valid [b,t] bool.
var ceObjective = Objective{
	Name:    "ce",
	Metrics: []string{"tokens"},
	Build: func(scope *gm.Scope, cfg model.Config, in []*Node) (*Node, map[string]*Node) {
		logits := model.Forward(scope, cfg, in[0], in[3], in[4])
		return model.CrossEntropy(logits, in[1], in[2]), map[string]*Node{"tokens": ReduceAllSum(in[2])}
	},
}

func objectiveInputs(b Batch) []*tensors.Tensor {
	n, t := b.Dims()
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
		mb, err := b.StepObjective(ceObjective, objectiveInputs(batch), 1e-2)
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
	ev, err := b.EvalObjective(ceObjective, objectiveInputs(batch))
	if err != nil || !(ev["loss"] > 0) {
		t.Fatalf("eval: %v %v", ev, err)
	}
	// A scalar-less objective is an error, not a crash.
	bad := Objective{Name: "bad", Build: func(scope *gm.Scope, cfg model.Config, in []*Node) (*Node, map[string]*Node) {
		return model.Forward(scope, cfg, in[0], in[3], in[4]), nil
	}}
	if _, err := b.StepObjective(bad, objectiveInputs(batch), 1e-2); err == nil {
		t.Fatal("want an error for a non-scalar loss")
	}
}
