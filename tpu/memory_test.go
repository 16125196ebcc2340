package tpu

import (
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model/modelcfg"
)

// TestMemoryBudget: a training step whose estimated memory exceeds Options.MemoryBudget is built
// with remat "layer" (lower estimate), one under it or with the model's remat set is not; and
// training under a budget that forces remat ends bit-identical to training without one, for full
// and LoRA training (the objective graphs go through the same compile).
func TestMemoryBudget(t *testing.T) {
	const rows, seq = 3, 12
	free := newRuntime(t, Options{Seed: 7})
	unbounded, err := free.TrainStepMemory(rows, seq)
	if err != nil {
		t.Fatal(err)
	}
	if unbounded.Remat != modelcfg.RematNone || unbounded.EstimateBytes <= 0 {
		t.Fatalf("no budget: plan %+v, want remat none and an estimate", unbounded)
	}
	explicit := tinyCfg()
	explicit.Remat = modelcfg.RematNone
	for _, tc := range []struct {
		name   string
		opts   Options
		remat  string
		higher bool // estimate no lower than without a budget
	}{
		{"under budget", Options{Seed: 7, MemoryBudget: unbounded.EstimateBytes}, modelcfg.RematNone, true},
		{"over budget", Options{Seed: 7, MemoryBudget: unbounded.EstimateBytes - 1}, modelcfg.RematLayer, false},
		{"remat set by the model", Options{Seed: 7, Model: explicit, MemoryBudget: 1}, modelcfg.RematNone, true},
	} {
		r := newRuntime(t, tc.opts)
		plan, err := r.TrainStepMemory(rows, seq)
		if err != nil {
			t.Fatal(err)
		}
		if plan.Remat != tc.remat || (plan.EstimateBytes >= unbounded.EstimateBytes) != tc.higher {
			t.Errorf("%s: plan %+v, want remat %s (estimate without budget %d)", tc.name, plan, tc.remat, unbounded.EstimateBytes)
		}
	}
	if _, err := New(Options{Model: tinyCfg(), MemoryBudget: -1}); err == nil || !strings.Contains(err.Error(), "memory_budget=-1") {
		t.Errorf("negative budget: err %v", err)
	}

	var batches []data.TokenBatch
	for i := range 3 {
		batches = append(batches, randomBatch(t, tinyCfg().Vocab, rows, seq, uint64(20+i)))
	}
	for _, lora := range []bool{false, true} {
		train := func(budget int64) map[string][]float32 {
			o := Options{Seed: 7, MemoryBudget: budget}
			if lora {
				o = loraOpts()
				o.MemoryBudget = budget
			}
			r := newRuntime(t, o)
			trainSteps(t, r, batches, 3e-3)
			if lora {
				a, err := r.ExportAdapters()
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			return exportWeights(t, r)
		}
		if k := bitsEqual(train(1), train(0)); k != "" {
			t.Errorf("lora=%v: training with remat (budget 1 byte) differs from without at %q", lora, k)
		}
	}
}
