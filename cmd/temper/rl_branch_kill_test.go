package main

import (
	"encoding/json"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/workflows"
)

// TestRLBranchExactResumeAfterSIGKILL: a sync GRPO phase forced to back-track (a non-finite update at
// iteration 2) runs the rest of the phase as the child workflow .grpo.b1 from the last good
// checkpoint. Run twice, once undisturbed and once with the trainer worker killed by SIGKILL during a
// policy step inside the branch, both must end with one back-track, in the branch's directory, on
// byte-identical weights and optimizer state.
func TestRLBranchExactResumeAfterSIGKILL(t *testing.T) {
	env, store, trainer, ids, from := rlKillBase(t, "rl-branch-kill")
	run := func(id string, in workflows.PipelineInput) client.WorkflowRun {
		return mustStart(t, env.Client, id, in)
	}
	branched := func(name string) workflows.PipelineInput {
		in := rlGRPOPipeline(store, from)
		in.Name = name
		in.Phases[0].Config = json.RawMessage(strings.Replace(rlGRPOConfig, `"mode":"sync"`, `"mode":"sync","inject_nan_at":2`, 1))
		return in
	}
	clean := waitRun(t, run(ids+"-clean", branched("rl-branch-clean")))
	r := run(ids+"-killed", branched("rl-branch-killed"))
	branch := ids + "-killed.grpo.b1"
	killMidActivity(t, env.Client, trainer, branch, trainapi.PolicyStepName, 3, 7)
	killed := waitRun(t, r)
	if n := rlRetried(t, env.Client, branch)[trainapi.PolicyStepName]; n < 1 {
		t.Errorf("want %s retried in the branch after the kill, got %d", trainapi.PolicyStepName, n)
	}
	for _, out := range []workflows.PipelineOutput{clean, killed} {
		ph := out.Phases[0]
		if m := ph.Metrics; m["backtracks"] != 1 || m["iterations"] != 7 || !strings.Contains(ph.Checkpoint, "/grpo.b1/") {
			t.Fatalf("run %s ended at %s with %v: want one back-track, 7 iterations, in grpo.b1", out.RunID, ph.Checkpoint, m)
		}
	}
	a, b := clean.Phases[0].Checkpoint, killed.Phases[0].Checkpoint
	if fileHash(t, from, trainapi.ModelFile) == fileHash(t, a, trainapi.ModelFile) {
		t.Fatal("the branch did not change the weights: the comparison would prove nothing")
	}
	sameState(t, a, b, "after the kill in the branch")
}
