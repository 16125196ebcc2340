package main

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/temperml/temper/workers/testenv"
)

// TestCancelStopsRunAndPhase starts a long demo phase, cancels the run with `temper cancel` while the
// phase is running and checks that both the pipeline and its phase workflow end canceled, and that
// `temper status` and the running phase's memo line (`now:`) report what happened.
func TestCancelStopsRunAndPhase(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	addr := env.Server.FrontendAddr()
	p := writeFile(t, "p.yaml", "name: c\nphases:\n- {name: a, kind: demo, config: {steps: 1000, step_duration: 50ms}}\n")
	if out, err := cli(t, "run", p, "--temporal", addr, "--id", "cli-cancel-1"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, _ := cli(t, "status", "cli-cancel-1", "--temporal", addr)
		if strings.Contains(out, "now: ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the phase never showed progress:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := cli(t, "cancel", "cli-cancel-1", "--temporal", addr); err != nil || !strings.Contains(out, "cancellation requested") {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	for _, id := range []string{"cli-cancel-1", "cli-cancel-1.a"} {
		var st enumspb.WorkflowExecutionStatus
		for time.Now().Before(deadline) {
			d, err := env.Client.DescribeWorkflowExecution(context.Background(), id, "")
			if err != nil {
				t.Fatal(err)
			}
			if st = d.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if st != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
			t.Errorf("%s ended %v, want canceled", id, st)
		}
	}
	if out, _ := cli(t, "status", "cli-cancel-1", "--temporal", addr); !strings.Contains(out, "canceled") {
		t.Errorf("status after cancel:\n%s", out)
	}
	if _, err := cli(t, "cancel", "--temporal", addr); err == nil {
		t.Error("cancel without a run ID must be a usage error")
	}
}
