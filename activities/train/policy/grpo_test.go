package policy_test

import (
	"math"
	"testing"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/workers/traintest"
)

// TestGroupPolicyStepsLearnToyTask runs iterations of the trainer's policy step with group
// advantages (no critic; two epochs of two minibatches, as the PPO test) on the toy task of
// TestPPOStepLearnsToyTask from a fresh tiny model: the reward must rise, and with the rewards
// inverted it must fall. A step that trained on misaligned tokens, or gave a rollout another
// rollout's advantage, would leave the reward where it was.
func TestGroupPolicyStepsLearnToyTask(t *testing.T) {
	for _, algo := range []string{losscfg.AlgoGRPO, losscfg.AlgoRLOO} {
		for _, invert := range []bool{false, true} {
			e := traintest.New(t)
			var init trainapi.InitOutput
			e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "pg", Phase: "sft", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 11}, &init)
			dir := t.TempDir()
			lc := losscfg.DefaultPolicyConfig(algo)
			lc.KLBeta = 0
			policy := init.Checkpoint
			_, _, before := ppoToyRollouts(t, policy, dir, 999, 128)
			for k := range 8 {
				uri, rewards, _ := ppoToyRollouts(t, policy, dir, k, 64)
				if invert {
					for i := range rewards {
						rewards[i] = 1 - rewards[i]
					}
				}
				in := trainapi.PolicyStepInput{Store: e.Store, Run: "pg", Phase: algo, Policy: policy, Version: k,
					Rollouts: uri, Rewards: rewards, Loss: lc, LR: 3e-3, Epochs: 2, Minibatch: 32, FreshOptimizer: k == 0,
					Optim: trainapi.Optim{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}}
				var out trainapi.PolicyStepOutput
				e.Must(trainapi.PolicyStepName, in, &out)
				if out.NonFinite || out.Version != k+1 {
					t.Fatalf("%s v%d: %+v", algo, k, out)
				}
				// Entropy is measured without an entropy bonus too, aggregated as the loss (rloo: a
				// sum over a completion's tokens, at most two here, each at most ln of the vocabulary).
				if h := out.Metrics["entropy"]; !(h > 0.01 && h <= 2*math.Log(float64(traintest.TinyModel(t).Vocab))+1e-3) {
					t.Fatalf("%s v%d: entropy %v, want the policy's measured entropy", algo, k, h)
				}
				policy = out.Checkpoint
			}
			_, _, after := ppoToyRollouts(t, policy, dir, 998, 128)
			t.Logf("%s inverted=%v: reward %.3f → %.3f", algo, invert, before, after)
			if !invert && !(after >= before+0.2) {
				t.Errorf("%s did not raise the toy reward: %.3f → %.3f", algo, before, after)
			}
			if invert && !(after <= before-0.2) {
				t.Errorf("%s with inverted rewards did not lower the toy reward: %.3f → %.3f", algo, before, after)
			}
		}
	}
}
