package workers

import (
	"github.com/temperml/temper/activities/train/rewardmodel"
	"github.com/temperml/temper/tpu"
)

var _ rewardmodel.VisionEngine = (*tpu.VisionRuntime)(nil)

// NewVisionEngine returns the engine factory of vision reward models (the reward phase with
// model.vision, the critic verifier on rendered layouts): one tpu.VisionRuntime per call, on the
// same backend and executor as the decoder's engines.
func NewVisionEngine(eo EngineOptions) rewardmodel.NewVisionEngine {
	return func(o rewardmodel.VisionEngineOptions) (rewardmodel.VisionEngine, error) {
		return tpu.NewVision(tpu.VisionOptions{
			Model: o.Model, Seed: o.Seed, Backend: eo.Backend, Executor: eo.Executor, Plugin: eo.Plugin,
			Optimizer: tpu.AdamW{Beta1: o.Optim.Beta1, Beta2: o.Optim.Beta2, Eps: o.Optim.Eps, WeightDecay: o.Optim.WeightDecay, ClipNorm: o.Optim.ClipNorm},
		})
	}
}
