package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/demo/demoapi"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

func TestMain(m *testing.M) {
	// A low event budget makes the server suggest continue-as-new after about two phases, so every
	// multi-phase test here also exercises the continue-as-new path.
	testenv.DynamicConfig = map[string]any{"limit.historyCount.suggestContinueAsNew": 10}
	os.Exit(m.Run())
}

func demoPhase(name string, steps int, extra string) workflows.PhaseSpec {
	return workflows.PhaseSpec{Name: name, Kind: "demo", Config: json.RawMessage(fmt.Sprintf(`{"steps":%d,"step_duration":"10ms"%s}`, steps, extra))}
}

func start(t *testing.T, c client.Client, in workflows.PipelineInput) client.WorkflowRun {
	t.Helper()
	id := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.QueueTemper, WorkflowExecutionTimeout: 2 * time.Minute,
	}, workflows.PipelineName, in)
	if err != nil {
		t.Fatalf("start pipeline: %v", err)
	}
	return run
}

func TestPipelinePassesCheckpointsAndContinuesAsNew(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	in := workflows.PipelineInput{Name: "chain", Store: "file:///tmp/temper-test", Phases: []workflows.PhaseSpec{
		demoPhase("a", 2, ""), demoPhase("b", 3, ""), demoPhase("c", 4, ""),
		{Name: "d", Kind: "demo", From: "a", Config: json.RawMessage(`{"steps":1,"step_duration":"1ms"}`)},
	}}
	run := start(t, env.Client, in)
	firstRunID := run.GetRunID() // Get follows the continue-as-new chain and moves GetRunID along
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if len(out.Phases) != 4 {
		t.Fatalf("want 4 phase results, got %+v", out.Phases)
	}
	for i, name := range []string{"a", "b", "c", "d"} {
		r := out.Phases[i]
		if r.Name != name || r.WorkflowID != run.GetID()+"."+name || !strings.HasSuffix(r.Checkpoint, "/"+name+"/step-"+fmt.Sprintf("%06d/", []int{2, 3, 4, 1}[i])) {
			t.Errorf("phase %d: %+v", i, r)
		}
	}
	// The first run must have continued as new: the low history budget forces it.
	desc, err := env.Client.DescribeWorkflowExecution(context.Background(), run.GetID(), firstRunID)
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		t.Errorf("first run status %v, want continued-as-new", st)
	}
	// "from" is honoured: b starts from a's output; d names a explicitly.
	assertChildFrom(t, env.Client, run.GetID()+".b", out.Phases[0].Checkpoint)
	assertChildFrom(t, env.Client, run.GetID()+".d", out.Phases[0].Checkpoint)
	assertChildFrom(t, env.Client, run.GetID()+".a", "")
	replayAll(t, env.Client, run.GetID())
}

// assertChildFrom reads the child workflow's input from its history.
func assertChildFrom(t *testing.T, c client.Client, childID, want string) {
	t.Helper()
	h := history(t, c, childID, "")
	attrs := h.Events[0].GetWorkflowExecutionStartedEventAttributes()
	var in workflows.PhaseInput
	if err := json.Unmarshal(attrs.Input.Payloads[0].Data, &in); err != nil {
		t.Fatal(err)
	}
	if in.From != want {
		t.Errorf("%s started from %q, want %q", childID, in.From, want)
	}
}

func history(t *testing.T, c client.Client, id, runID string) *historypb.History {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		h.Events = append(h.Events, e)
	}
	return h
}

// replayAll replays every run of the pipeline and of its children against today's code: a change that
// breaks determinism fails here.
func replayAll(t *testing.T, c client.Client, id string) {
	t.Helper()
	r := worker.NewWorkflowReplayer()
	workers.RegisterWorkflows(r)
	resp, err := c.ListWorkflow(context.Background(), workflowListRequest{query: fmt.Sprintf("WorkflowId = '%s' OR WorkflowId STARTS_WITH '%s.'", id, id)}.build())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Executions) < 2 {
		t.Fatalf("want several executions to replay, got %d", len(resp.Executions))
	}
	for _, ex := range resp.Executions {
		h := history(t, c, ex.Execution.WorkflowId, ex.Execution.RunId)
		opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: ex.Execution.WorkflowId, RunID: ex.Execution.RunId}}
		if err := r.ReplayWorkflowHistoryWithOptions(nil, h, opts); err != nil {
			t.Errorf("replay %s/%s: %v", ex.Execution.WorkflowId, ex.Execution.RunId, err)
		}
	}
}

func TestPipelineRejectsBadConfigWithoutRetrying(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	in := workflows.PipelineInput{Phases: []workflows.PhaseSpec{{Name: "a", Kind: "demo", Config: json.RawMessage(`{"stepz": 3}`)}}}
	err := start(t, env.Client, in).Get(context.Background(), nil)
	var appErr *temporal.ApplicationError
	if err == nil || !asApp(err, &appErr) || !appErr.NonRetryable() {
		t.Fatalf("want a non-retryable application error, got %v", err)
	}
	if !strings.Contains(err.Error(), `phases[0].config.stepz`) || !strings.Contains(err.Error(), `did you mean "steps"`) {
		t.Fatalf("error should name the field and suggest: %v", err)
	}
}

// TestWorkerStopMidActivity stops the only trainer worker while its activity heartbeats, then starts
// another: the run completes, resuming from the last heartbeat rather than from step 0.
func TestWorkerStopMidActivity(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	first := env.Worker(t, workflows.QueueTrainer, func(r worker.Registry) { _ = workers.Register(workflows.QueueTrainer, r, workers.Options{}) })
	run := start(t, env.Client, workflows.PipelineInput{Phases: []workflows.PhaseSpec{
		{Name: "long", Kind: "demo", Config: json.RawMessage(`{"steps":40,"step_duration":"100ms","heartbeat_timeout":"2s"}`)},
	}})
	childID := run.GetID() + ".long"
	waitFor(t, 30*time.Second, func() bool { return heartbeatStep(env.Client, childID) >= 8 })
	first.Stop()
	time.Sleep(500 * time.Millisecond)
	env.Worker(t, workflows.QueueTrainer, func(r worker.Registry) { _ = workers.Register(workflows.QueueTrainer, r, workers.Options{}) })
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline after worker stop: %v", err)
	}
	m := out.Phases[0].Metrics
	if m["attempts"] < 2 || m["resumed_from"] < 1 || m["steps"] != 40 {
		t.Fatalf("want a second attempt resuming from a heartbeat, got %v", m)
	}
	t.Logf("resumed from step %v on attempt %v", m["resumed_from"], m["attempts"])
}

func heartbeatStep(c client.Client, wfID string) int {
	desc, err := c.DescribeWorkflowExecution(context.Background(), wfID, "")
	if err != nil {
		return -1
	}
	for _, pa := range desc.PendingActivities {
		if pa.HeartbeatDetails == nil || len(pa.HeartbeatDetails.Payloads) == 0 {
			continue
		}
		var p demoapi.Progress
		if json.Unmarshal(pa.HeartbeatDetails.Payloads[0].Data, &p) == nil {
			return p.Step
		}
	}
	return -1
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
