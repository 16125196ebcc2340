package policy_test

import (
	"testing"
	"time"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/workers/traintest"
)

// TestPolicyStepHeartbeatsThroughSlowWork: a full-batch policy step (minibatch 0), scheduled by a
// workflow with a heartbeat timeout, whose one optimizer step takes twice that timeout, keeps
// heartbeating while it works (train.Beats' goroutine) and completes on its first attempt; without those
// heartbeats Temporal times the attempt out.
func TestPolicyStepHeartbeatsThroughSlowWork(t *testing.T) {
	const timeout = 3 * time.Second // the SDK sends a batch's heartbeats every 0.8 timeout
	e := traintest.New(t)
	var pol trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "hb", Phase: "sft", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 11}, &pol)
	uri, rewards, _ := ppoToyRollouts(t, pol.Checkpoint, t.TempDir(), 0, 8)

	in := trainapi.PolicyStepInput{Store: e.Store, Run: "hb", Phase: "grpo", Policy: pol.Checkpoint, Rollouts: uri, Rewards: rewards,
		Loss: losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO), LR: 3e-3, FreshOptimizer: true,
		Optim: trainapi.Optim{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}}
	var out trainapi.PolicyStepOutput
	if err := e.RunSlowOnce(trainapi.PolicyStepName, timeout, 2*timeout, in, &out); err != nil {
		t.Fatalf("policy step with a %v heartbeat timeout: %v", timeout, err)
	}
	if out.Metrics["optimizer_steps"] != 1 || out.Metrics["seconds_optimize"] < (2*timeout).Seconds() {
		t.Fatalf("want one optimizer step of at least %v (longer than the heartbeat timeout): %v", 2*timeout, out.Metrics)
	}
}
