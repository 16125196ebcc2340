package workers

import (
	"strings"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/model"
)

// TestTrainEngineMemoryBudget: EngineOptions.MemoryBudget reaches the runtime (the --memory-budget
// of `temper worker` and the embedded stacks): under a one-byte budget a training step is built
// with remat "layer", without one "none"; a negative budget is refused by name.
func TestTrainEngineMemoryBudget(t *testing.T) {
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		budget    int64
		wantRemat string
		wantErr   string
	}{
		{0, "none", ""},
		{1, "layer", ""},
		{-1, "", "memory_budget=-1"},
	} {
		eng, err := NewTrainEngine(EngineOptions{MemoryBudget: tc.budget})(train.EngineOptions{Model: cfg, Seed: 1})
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("budget %d: err %v, want %q", tc.budget, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		plan, err := eng.(engine).rt.TrainStepMemory(2, 16)
		eng.Close()
		if err != nil {
			t.Fatal(err)
		}
		if plan.Remat != tc.wantRemat {
			t.Errorf("budget %d: remat %q, want %q", tc.budget, plan.Remat, tc.wantRemat)
		}
	}
}
