package train

import (
	"math"
	"testing"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/schedule"
)

// TestLRSchedule: the one schedule gives every kind the rate it had: a chunk's step the chunk
// runner's warmup-cosine, an RL iteration the rate the RL workflow computed (warmup-cosine over the
// iterations times back-tracking's scale), bit for bit; an input of the old form keeps its rate.
func TestLRSchedule(t *testing.T) {
	for _, o := range []trainapi.Optim{
		{LR: 3e-3, WarmupSteps: 20, MinLRRatio: 0.1},
		{LR: 1e-4, WarmupSteps: 20, MinLRRatio: 1},
		{LR: 5e-4, WarmupSteps: 0, MinLRRatio: 0},
		{LR: 1e-3, WarmupSteps: 80, MinLRRatio: 0.5},
	} {
		for _, total := range []int{1, 10, 40, 200} {
			for step := 0; step <= total+3; step++ {
				ref := schedule.WarmupCosine{Peak: o.LR, Warmup: o.WarmupSteps, Total: total, MinRatio: o.MinLRRatio}.At(step)
				if got := LR(o, step, total); math.Float64bits(got) != math.Float64bits(ref) {
					t.Fatalf("%+v step %d of %d: LR %v, chunk runner's %v", o, step, total, got, ref)
				}
				for _, scale := range []float64{1, 0.5, 0.25, 0.125} {
					in := trainapi.PolicyStepInput{Optim: o, Iteration: step, Iterations: total, LRScale: scale}
					if got, want := PolicyLR(in), ref*scale; math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("%+v iteration %d of %d, scale %v: %v, the workflow's %v", o, step, total, scale, got, want)
					}
				}
			}
		}
	}
	// Hand-computed RL cases (workflows' TestRLLearningRateSchedule): warmup over 4 of 10 iterations
	// then constant; cosine to 0.1 at the last iteration; the RL default (warmup 20 of 40, constant).
	for _, tc := range []struct {
		o           trainapi.Optim
		iter, of    int
		scale, want float64
	}{
		{trainapi.Optim{LR: 0.001, WarmupSteps: 4, MinLRRatio: 1}, 0, 10, 1, 0.00025},
		{trainapi.Optim{LR: 0.001, WarmupSteps: 4, MinLRRatio: 1}, 1, 10, 1, 0.0005},
		{trainapi.Optim{LR: 0.001, WarmupSteps: 4, MinLRRatio: 1}, 3, 10, 1, 0.001},
		{trainapi.Optim{LR: 0.001, WarmupSteps: 4, MinLRRatio: 1}, 9, 10, 1, 0.001},
		{trainapi.Optim{LR: 0.001, MinLRRatio: 0.1}, 10, 10, 1, 0.0001},
		{trainapi.Optim{LR: 0.001, WarmupSteps: 20, MinLRRatio: 1}, 0, 40, 1, 0.00005},
		{trainapi.Optim{LR: 0.001, WarmupSteps: 20, MinLRRatio: 1}, 9, 40, 1, 0.0005},
		{trainapi.Optim{LR: 0.001, WarmupSteps: 20, MinLRRatio: 1}, 20, 40, 0.5, 0.0005},
		{trainapi.Optim{LR: 0.001, WarmupSteps: 20, MinLRRatio: 1}, 39, 40, 1, 0.001},
	} {
		in := trainapi.PolicyStepInput{Optim: tc.o, Iteration: tc.iter, Iterations: tc.of, LRScale: tc.scale}
		if got := PolicyLR(in); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%+v iteration %d of %d, scale %v: %g, want %g", tc.o, tc.iter, tc.of, tc.scale, got, tc.want)
		}
	}
	if got := PolicyLR(trainapi.PolicyStepInput{Optim: trainapi.Optim{LR: 1}, LR: 2.5e-5, Iteration: 3}); got != 2.5e-5 {
		t.Fatalf("an input from before the schedule moved: %v, want its lr 2.5e-5", got)
	}
	if got := PolicyLR(trainapi.PolicyStepInput{Optim: trainapi.Optim{LR: 2e-4}, Iteration: 0, Iterations: 5}); got != 2e-4 {
		t.Fatalf("lr_scale 0 (absent): %v, want the unscaled 2e-4", got)
	}
}
