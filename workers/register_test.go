package workers

import (
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/workflows"
)

// names records what a role registers; the methods it does not override are never called.
type names struct {
	worker.Registry
	activities, workflows []string
}

func (n *names) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	n.activities = append(n.activities, o.Name)
}

func (n *names) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	n.workflows = append(n.workflows, o.Name)
}

// TestRegisteredNames pins the activity names each role registers: they are in the histories of runs
// in flight and of the stored histories, so a rename or a lost registration must fail here first.
func TestRegisteredNames(t *testing.T) {
	for _, c := range []struct {
		role       string
		activities string
	}{
		{workflows.QueueTemper, "temper.DefaultStore temper.Ping"},
		{workflows.QueueTrainer, "control.Log demo.Tick train.Chunk train.DistillChunk train.DistillTargets train.Evaluate " +
			"train.Init train.OnlineDPOStep train.PRMChunk train.PRMEvaluate train.PolicyStep train.PrefChunk train.PrefEvaluate train.PreferencesFromModel train.RefLogProbs " +
			"train.Retain train.RewardChunk train.RewardEvaluate train.RewardInit trainer.Ping"},
		{workflows.QueueRollout, "rollout.AgentEval rollout.Generate rollout.Keep rollout.Ping rollout.Search rollout.SearchData"},
		{workflows.QueueReward, "reward.Ping reward.Score"},
		{workflows.QueueTools, "tools.Ping tools.Run"},
	} {
		var n names
		if err := Register(c.role, &n, Options{}); err != nil {
			t.Fatalf("register %s: %v", c.role, err)
		}
		slices.Sort(n.activities)
		want := strings.Fields(c.activities)
		slices.Sort(want)
		if !slices.Equal(n.activities, want) {
			t.Errorf("role %s registers activities\n%s\nwant\n%s", c.role, strings.Join(n.activities, " "), strings.Join(want, " "))
		}
		if c.role == workflows.QueueTemper && !slices.Contains(n.workflows, workflows.PipelineName) {
			t.Errorf("role %s registers workflows %v: want %s among them", c.role, n.workflows, workflows.PipelineName)
		}
	}
	if err := Register("nope", &names{}, Options{}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("register an unknown role: %v", err)
	}
}
