package main

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/workflows"
)

// TestSteerExactAfterSIGKILL (issue 40, acceptance 1): two runs of the same GRPO phase are given
// the same change (optimizer.lr, loss.kl_beta) at the same boundary, k = 3 of 7 iterations; in the
// second the trainer worker is killed by SIGKILL during a policy step after the change and
// restarted. Both end on byte-identical weights and optimizer state, which differ from the start.
func TestSteerExactAfterSIGKILL(t *testing.T) {
	env, store, trainer, ids, from := rlKillBase(t, "steer-kill")
	const k = 3
	change := workflows.SteerRequest{Set: []string{"optimizer.lr=3e-5", "loss.kl_beta=0.02"}, At: k}
	steered := func(id string) client.WorkflowRun {
		r := mustStart(t, env.Client, id, rlGRPOPipeline(store, from))
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			reply, err := pipeline.Steer(context.Background(), env.Client, id, workflows.UpdateSet, change)
			if err == nil {
				if reply.At != k {
					t.Fatalf("set at %d: reply %+v", k, reply)
				}
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("set: %v", err)
			}
		}
	}
	clean := waitRun(t, steered(ids+"-clean"))
	r := steered(ids + "-killed")
	wfID := ids + "-killed.grpo"
	killMidActivity(t, env.Client, trainer, wfID, trainapi.PolicyStepName, k+1, 7)
	killed := waitRun(t, r)
	a, b := clean.Phases[0].Checkpoint, killed.Phases[0].Checkpoint
	if fileHash(t, from, trainapi.ModelFile) == fileHash(t, a, trainapi.ModelFile) {
		t.Fatal("GRPO did not change the weights: the comparison would prove nothing")
	}
	sameState(t, a, b, "after the kill")
}
