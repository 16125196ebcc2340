package workflows_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/control/controlapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// steerGRPO is a tiny sync GRPO phase whose weights really move (a format reward its random
// completions meet only sometimes), at lr 3e-4 after a 2-iteration warmup.
const steerGRPO = `{"data":{"task":"add2","heldout_examples":16},"mode":"sync","iterations":%d,"prompts":4,"group":4,
	"max_new_tokens":8,"reward":{"verifiers":[{"name":"format","params":{"regex":["[0-9]","^[0-9]"]}}]},
	"optimizer":{"lr":0.0003,"warmup_steps":2},"eval_every":0,"eval":{"examples":16,"max_new_tokens":4,"before":false},
	"heartbeat_timeout":"10s"}`

// pauseSeconds is how long TestSteerGRPO keeps every worker stopped while the phase is paused
// (TEMPER_PAUSE_SECONDS; 30 is the scenario, by hand).
func pauseSeconds(t *testing.T) time.Duration {
	if s := os.Getenv("TEMPER_PAUSE_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("TEMPER_PAUSE_SECONDS=%q: %v", s, err)
		}
		return time.Duration(n) * time.Second
	}
	return 3 * time.Second
}

// TestSteerGRPO (issue 40, acceptance 1–3): a GRPO phase is given optimizer.lr=1e-4
// loss.kl_beta=0.02 through its pipeline at iteration ~8; the reply names the boundary k, the
// metrics log shows the old learning rate up to k and the new one after, the policy steps' inputs
// the old and new KL coefficient, and the change is a control record at k. Invalid changes are
// refused naming the field, with no event in any history. A second run is given the same change at
// the same boundary (--at k) and a pause after iteration 3, during which every worker (the workflow
// worker too) is stopped and started again; resumed, it ends on byte-identical weights and
// optimizer state, and no activity ran while it was paused.
func TestSteerGRPO(t *testing.T) {
	env := testenv.Get(t)
	roles, _ := workers.ParseRoles("all")
	ws := startWorkers(t, env, roles)
	t.Cleanup(func() { workers.StopAll(*ws) })
	dir := t.TempDir()
	store := "file://" + dir
	base := runSFTBase(t, env, store)
	const iterations = 12
	grpo := func(name string) workflows.PipelineInput {
		return workflows.PipelineInput{Name: name, Store: store, Seed: 3, Phases: []workflows.PhaseSpec{
			{Name: "grpo", Kind: "grpo", From: base, Config: json.RawMessage(fmt.Sprintf(steerGRPO, iterations))}}}
	}
	ids := fmt.Sprintf("steer-%d", time.Now().UnixNano())

	// The first run: the change at iteration ~8, as a person would send it.
	first := startID(t, env.Client, ids+"-first", grpo("first"))
	waitDone(t, env.Client, first.GetID()+".grpo", 8)
	for _, bad := range []struct{ set, words string }{
		{"model.layers=2", "model.layers: not a live field"}, {"optimizer.lr=-1", "optimizer.lr: -1: want 0 < lr < 10"},
	} {
		_, err := steer(env.Client, first.GetID(), workflows.UpdateSet, workflows.SteerRequest{Phase: "grpo", Set: []string{bad.set}})
		if err == nil || !strings.Contains(err.Error(), bad.words) {
			t.Errorf("set %s: %v, want refused with %q", bad.set, err, bad.words)
		}
	}
	reply, err := steer(env.Client, first.GetID(), workflows.UpdateSet, workflows.SteerRequest{Phase: "grpo", Set: []string{"optimizer.lr=1e-4", "loss.kl_beta=0.02"}})
	if err != nil {
		t.Fatal(err)
	}
	k := reply.At
	t.Logf("set: %s", reply.Message)
	if k < 8 || k >= iterations || reply.Unit != "iteration" || reply.Workflow != first.GetID()+".grpo" {
		t.Fatalf("reply %+v: want a boundary after iteration 8 or later, before the end, taken by the phase", reply)
	}
	a := waitOut(t, first)

	// The second run: the same change at k (asked before it gets there), paused after iteration 3.
	// Sent until the pipeline has a phase running to forward it to: the first that lands reaches the
	// phase with its first workflow task.
	second := startID(t, env.Client, ids+"-second", grpo("second"))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		_, err := steer(env.Client, second.GetID(), workflows.UpdateSet, workflows.SteerRequest{Set: []string{"optimizer.lr=1e-4", "loss.kl_beta=0.02"}, At: k})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "no phase is running") || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	if r, err := steer(env.Client, second.GetID(), workflows.UpdatePause, workflows.SteerRequest{At: 3, Note: "look at the curves"}); err != nil || r.At != 3 {
		t.Fatalf("pause: %+v, %v", r, err)
	}
	st := waitPaused(t, env.Client, second.GetID()+".grpo")
	workers.StopAll(*ws)
	t.Logf("paused after iteration %d; every worker stopped for %v", st.Paused.At, pauseSeconds(t))
	time.Sleep(pauseSeconds(t))
	*ws = *startWorkers(t, env, roles)
	if _, err := steer(env.Client, second.GetID(), workflows.UpdateResume, workflows.SteerRequest{}); err != nil {
		t.Fatal(err)
	}
	b := waitOut(t, second)

	for _, name := range []string{trainapi.ModelFile, trainapi.OptimizerFile} {
		if ha, hb := hashFile(t, a.Phases[0].Checkpoint, name), hashFile(t, b.Phases[0].Checkpoint, name); ha != hb {
			t.Errorf("%s: %s after the change at %d, %s after the same change at %d with a pause", name, ha, k, hb, k)
		}
	}
	if hashFile(t, base, trainapi.ModelFile) == hashFile(t, a.Phases[0].Checkpoint, trainapi.ModelFile) {
		t.Fatal("GRPO did not change the weights: the comparison would prove nothing")
	}
	checkSteerLog(t, dir, first.GetID(), k)
	checkStepInputs(t, env.Client, first.GetID()+".grpo", k)
	checkNothingWhilePaused(t, env.Client, second.GetID()+".grpo")
	for _, id := range []string{first.GetID(), first.GetID() + ".grpo"} {
		if n := countUpdates(t, env.Client, id); n != 1 {
			t.Errorf("%s: %d accepted updates in its history, want 1 (the refused ones leave none)", id, n)
		}
	}
	replayAll(t, env.Client, first.GetID())
	replayAll(t, env.Client, second.GetID())
}

// startWorkers starts every role's worker on the test server (stopped by the caller).
func startWorkers(t *testing.T, env *testenv.Env, roles []string) *[]worker.Worker {
	ws, err := workers.Start(env.Client, roles, workers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &ws
}

// runSFTBase trains the tiny SFT checkpoint the RL runs start from.
func runSFTBase(t *testing.T, env *testenv.Env, store string) string {
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":300,"heldout_examples":16},
		"batch":{"rows":8,"seq":32},"steps":6,"chunk_steps":6,"eval":{"examples":16,"max_new_tokens":4,"before":false}}`
	in := workflows.PipelineInput{Name: "base", Store: store, Seed: 3, Phases: []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)}}}
	out := waitOut(t, startID(t, env.Client, fmt.Sprintf("steer-base-%d", time.Now().UnixNano()), in))
	return out.Phases[0].Checkpoint
}

func startID(t *testing.T, c client.Client, id string, in workflows.PipelineInput) client.WorkflowRun {
	t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.QueueTemper,
		WorkflowExecutionTimeout: 10 * time.Minute}, workflows.PipelineName, in)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func waitOut(t *testing.T, run client.WorkflowRun) workflows.PipelineOutput {
	t.Helper()
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("%s: %v", run.GetID(), err)
	}
	return out
}

// steer sends a steering Update to workflow id and waits for its reply.
func steer(c client.Client, id, name string, req workflows.SteerRequest) (workflows.SteerReply, error) {
	var reply workflows.SteerReply
	h, err := c.UpdateWorkflow(context.Background(), client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(context.Background(), &reply)
	}
	return reply, err
}

// steerStatus asks the phase workflow id its live state.
func steerStatus(c client.Client, id string) (workflows.SteerStatus, error) {
	var st workflows.SteerStatus
	v, err := c.QueryWorkflow(context.Background(), id, "", workflows.SteerQuery)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err
}

// waitDone waits until the phase workflow answers its query with at least n iterations done.
func waitDone(t *testing.T, c client.Client, id string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st, err := steerStatus(c, id); err == nil && st.Done >= n {
			return
		}
	}
	t.Fatalf("%s never reached iteration %d", id, n)
}

func waitPaused(t *testing.T, c client.Client, id string) workflows.SteerStatus {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if st, err := steerStatus(c, id); err == nil && st.Paused != nil {
			return st
		}
	}
	t.Fatalf("%s never paused", id)
	return workflows.SteerStatus{}
}

func hashFile(t *testing.T, uri, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(strings.TrimPrefix(uri, "file://"), name))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// checkSteerLog: the metrics log's learning rate is the old peak up to iteration k and the new one
// after, and a control record at k holds the new values.
func checkSteerLog(t *testing.T, dir, run string, k int) {
	t.Helper()
	recs, err := ckpt.New(ckpt.Options{}).ReadMetrics(context.Background(), "file://"+dir, run, "grpo")
	if err != nil {
		t.Fatal(err)
	}
	controls := 0
	for _, r := range recs {
		switch r.Kind {
		case ckpt.RecordTrain:
			want := 3e-4
			if r.Step <= 2 {
				want = 3e-4 * float64(r.Step) / 2 // warmup
			}
			if r.Step > k {
				want = 1e-4
			}
			if d := r.Metrics["lr"] - want; d > 1e-12 || d < -1e-12 {
				t.Errorf("iteration %d trained at lr %g, want %g (change after %d)", r.Step, r.Metrics["lr"], want, k)
			}
		case ckpt.RecordControl:
			controls++
			if r.Step != k || r.Event != "set" || r.Metrics["optimizer.lr"] != 1e-4 || r.Metrics["loss.kl_beta"] != 0.02 ||
				!strings.Contains(r.Label, "loss.kl_beta 0.04→0.02") {
				t.Errorf("control record %+v, want the set at %d", r, k)
			}
		}
	}
	if controls != 1 {
		t.Errorf("%d control records, want 1", controls)
	}
}

// checkStepInputs: the policy steps' inputs (every run of the phase) carry the old KL coefficient
// before iteration k+1 and the new one from it.
func checkStepInputs(t *testing.T, c client.Client, id string, k int) {
	t.Helper()
	seen := 0
	forEachEvent(t, c, id, func(e eventView) {
		if e.scheduled != trainapi.PolicyStepName {
			return
		}
		var in trainapi.PolicyStepInput
		if err := json.Unmarshal(e.input, &in); err != nil {
			t.Fatal(err)
		}
		want := map[bool]float64{false: 0.04, true: 0.02}[in.Iteration >= k]
		if in.Loss.KLBeta != want {
			t.Errorf("iteration %d stepped with kl_beta %g, want %g", in.Iteration+1, in.Loss.KLBeta, want)
		}
		seen++
	})
	if seen == 0 {
		t.Fatal("no policy step in the phase's histories")
	}
}

// checkNothingWhilePaused: between the pause's control record and the resume, the phase scheduled
// and started no activity.
func checkNothingWhilePaused(t *testing.T, c client.Client, id string) {
	t.Helper()
	var paused, resumed time.Time
	var pauseLog int64
	var pauseRun string
	var starts []time.Time
	var scheduledAt []time.Time
	forEachEvent(t, c, id, func(e eventView) {
		switch {
		case e.scheduled == controlapi.LogName && strings.Contains(string(e.input), `"event":"pause"`):
			pauseLog, pauseRun = e.id, e.run
		case e.completedOf == pauseLog && e.run == pauseRun:
			paused = e.time
		case e.update == workflows.UpdateResume:
			resumed = e.time
		case e.scheduled != "":
			scheduledAt = append(scheduledAt, e.time)
		case e.started:
			starts = append(starts, e.time)
		}
	})
	if paused.IsZero() || resumed.IsZero() || !resumed.After(paused) {
		t.Fatalf("paused at %v, resumed at %v", paused, resumed)
	}
	for _, at := range append(starts, scheduledAt...) {
		if at.After(paused) && at.Before(resumed) {
			t.Errorf("an activity was scheduled or started at %v, while paused (%v to %v)", at, paused, resumed)
		}
	}
	t.Logf("paused for %v with no activity", resumed.Sub(paused).Round(time.Millisecond))
}

// eventView is what the checks read of a history event.
type eventView struct {
	run         string // the run of the workflow (event IDs start again in each)
	id          int64
	time        time.Time
	scheduled   string // activity type of an ActivityTaskScheduled
	input       []byte
	started     bool
	completedOf int64  // scheduled event of an ActivityTaskCompleted
	update      string // name of an accepted Update
}

// forEachEvent calls f on every event of every run of workflow id, in order.
func forEachEvent(t *testing.T, c client.Client, id string, f func(eventView)) {
	t.Helper()
	resp, err := c.ListWorkflow(context.Background(), workflowListRequest{query: "WorkflowId = '" + id + "'"}.build())
	if err != nil {
		t.Fatal(err)
	}
	for i := len(resp.Executions) - 1; i >= 0; i-- { // oldest run first
		run := resp.Executions[i].Execution.RunId
		for _, e := range history(t, c, id, run).Events {
			v := eventView{run: run, id: e.GetEventId(), time: e.GetEventTime().AsTime()}
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				a := e.GetActivityTaskScheduledEventAttributes()
				v.scheduled, v.input = a.GetActivityType().GetName(), a.GetInput().GetPayloads()[0].GetData()
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				v.started = true
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				v.completedOf = e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				v.update = e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName()
			}
			f(v)
		}
	}
}

// countUpdates counts the Updates accepted in workflow id's histories.
func countUpdates(t *testing.T, c client.Client, id string) int {
	n := 0
	forEachEvent(t, c, id, func(e eventView) {
		if e.update != "" {
			n++
		}
	})
	return n
}

// TestSteerSFT: a chunked phase (sft, one chunk per run: the test server continues it as new after
// each) given more steps and another peak learning rate after step 2, and paused after step 4:
// the chunks from step 2 on are asked for the new total and peak, the phase ends at the new total,
// and the control records sit at their boundaries.
func TestSteerSFT(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	store := "file://" + t.TempDir()
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":300,"heldout_examples":16},
		"batch":{"rows":8,"seq":32},"steps":8,"chunk_steps":2,"eval":{"examples":16,"max_new_tokens":4,"before":false}}`
	in := workflows.PipelineInput{Name: "steer-sft", Store: store, Seed: 3, Phases: []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)}}}
	id := fmt.Sprintf("steer-sft-%d", time.Now().UnixNano())
	run := startID(t, env.Client, id, in)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		_, err := steer(env.Client, id, workflows.UpdateSet, workflows.SteerRequest{Set: []string{"steps=10", "optimizer.lr=0.006"}, At: 2})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "no phase is running") || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	if _, err := steer(env.Client, id, workflows.UpdatePause, workflows.SteerRequest{At: 3}); err != nil {
		t.Fatal(err)
	}
	st := waitPaused(t, env.Client, id+".sft")
	if st.Paused.At != 4 || st.Unit != "step" || st.Live["steps"] != 10 {
		t.Fatalf("paused state %+v: want paused after step 4 (the chunk boundary at or after 3), steps 10", st)
	}
	if _, err := steer(env.Client, id, workflows.UpdateResume, workflows.SteerRequest{}); err != nil {
		t.Fatal(err)
	}
	out := waitOut(t, run)
	if out.Phases[0].Metrics["steps"] != 10 {
		t.Fatalf("metrics %v: want 10 steps", out.Phases[0].Metrics)
	}
	chunks := 0
	forEachEvent(t, env.Client, id+".sft", func(e eventView) {
		if e.scheduled != trainapi.ChunkName {
			return
		}
		var head trainapi.ChunkHead
		if err := json.Unmarshal(e.input, &head); err != nil {
			t.Fatal(err)
		}
		lr, total := 0.003, 8
		if head.Step >= 2 {
			lr, total = 0.006, 10
		}
		if head.Optim.LR != lr || head.TotalSteps != total {
			t.Errorf("chunk at step %d: lr %g of %d steps, want %g of %d", head.Step, head.Optim.LR, head.TotalSteps, lr, total)
		}
		chunks++
	})
	recs, err := ckpt.New(ckpt.Options{}).ReadMetrics(context.Background(), store, id, "sft")
	if err != nil {
		t.Fatal(err)
	}
	var controls []string
	for _, r := range recs {
		if r.Kind == ckpt.RecordControl {
			controls = append(controls, fmt.Sprintf("%s@%d", r.Event, r.Step))
		}
	}
	if chunks != 5 || strings.Join(controls, " ") != "set@2 pause@4 resume@4" {
		t.Errorf("%d chunks, control records %v: want 5 chunks, set@2 pause@4 resume@4", chunks, controls)
	}
	replayAll(t, env.Client, id)
}
