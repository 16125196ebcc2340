package policy_test

import (
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/policy"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/workers/traintest"
)

// slowSteps is an engine whose optimizer steps take at least d: a full batch on a loaded machine.
type slowSteps struct {
	train.Engine
	d time.Duration
}

func (s slowSteps) StepObjective(obj objective.Objective, b objective.Batch, lr float32) (map[string]float32, error) {
	time.Sleep(s.d)
	return s.Engine.StepObjective(obj, b, lr)
}

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

	deps := *e.Deps
	deps.NewEngine = func(o train.EngineOptions) (train.Engine, error) {
		eng, err := traintest.NewEngine(o)
		return slowSteps{eng, 2 * timeout}, err
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetTestTimeout(10 * time.Minute)
	policy.Register(env, &deps)
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in trainapi.PolicyStepInput) (trainapi.PolicyStepOutput, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: timeout,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out trainapi.PolicyStepOutput
		err := workflow.ExecuteActivity(ctx, trainapi.PolicyStepName, in).Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "policyStepOnce"})

	in := trainapi.PolicyStepInput{Store: e.Store, Run: "hb", Phase: "grpo", Policy: pol.Checkpoint, Rollouts: uri, Rewards: rewards,
		Loss: losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO), LR: 3e-3, FreshOptimizer: true,
		Optim: trainapi.Optim{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}}
	env.ExecuteWorkflow("policyStepOnce", in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("policy step with a %v heartbeat timeout: %v", timeout, err)
	}
	var out trainapi.PolicyStepOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if out.Metrics["optimizer_steps"] != 1 || out.Metrics["seconds_optimize"] < (2*timeout).Seconds() {
		t.Fatalf("want one optimizer step of at least %v (longer than the heartbeat timeout): %v", 2*timeout, out.Metrics)
	}
}
