package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// Stored histories: testdata/histories/<case>/ holds the event histories of every execution (the
// pipeline, its phases, their continue-as-new runs) of a representative run, recorded by
// TestRecordHistories, and index.json lists them with their workflow and run IDs (workflow code
// derives child IDs from its own, so a replay needs the original ones). TestStoredHistories replays
// them with the current workflow code: a change that would break a run in flight fails it.
//
// Re-record (after a deliberate, versioned or pre-release change of workflow code):
//
//	TEMPER_RECORD_HISTORIES=1 go test -short -run TestRecordHistories ./workflows/
const historiesDir = "testdata/histories"

type storedExecution struct {
	File       string `json:"file"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Type       string `json:"type"`
}

// TestStoredHistories replays every stored history with the worker's current workflow code.
func TestStoredHistories(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join(historiesDir, "*", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no stored histories under %s (record them: TEMPER_RECORD_HISTORIES=1 go test -run TestRecordHistories ./workflows/)", historiesDir)
	}
	r := worker.NewWorkflowReplayer()
	workers.RegisterWorkflows(r)
	for _, index := range cases {
		dir := filepath.Dir(index)
		var execs []storedExecution
		b, err := os.ReadFile(index)
		if err == nil {
			err = json.Unmarshal(b, &execs)
		}
		if err != nil || len(execs) == 0 {
			t.Fatalf("%s: %v (%d executions)", index, err, len(execs))
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			for _, ex := range execs {
				f, err := os.Open(filepath.Join(dir, ex.File))
				if err != nil {
					t.Fatal(err)
				}
				h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
				f.Close()
				if err != nil {
					t.Fatalf("%s: %v", ex.File, err)
				}
				opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: ex.WorkflowID, RunID: ex.RunID}}
				if err := r.ReplayWorkflowHistoryWithOptions(nil, h, opts); err != nil {
					t.Errorf("replay %s (%s %s): %v", ex.File, ex.Type, ex.WorkflowID, err)
				}
			}
		})
	}
}

// TestRecordHistories runs the representative pipelines and stores their histories (set
// TEMPER_RECORD_HISTORIES=1; it replaces testdata/histories/<case>/ for every case it runs).
func TestRecordHistories(t *testing.T) {
	if os.Getenv("TEMPER_RECORD_HISTORIES") == "" {
		t.Skip("records test data: set TEMPER_RECORD_HISTORIES=1")
	}
	env := testenv.Get(t)
	env.Roles(t)
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":300,"heldout_examples":16},
		"batch":{"rows":8,"seq":32},"steps":4,"chunk_steps":2,"eval":{"examples":16,"max_new_tokens":4,"before":false}}`
	dpo := `{"data":{"task":"add2","train_examples":64,"heldout_examples":16},"batch":{"rows":8,"seq":16},
		"steps":4,"chunk_steps":2,"eval":{"examples":16,"max_new_tokens":4,"kl_tokens":4}}`
	rm := `{"data":{"task":"add2","train_pairs":100,"heldout_pairs":16},"batch":{"rows":8,"max_seq":32},
		"steps":4,"chunk_steps":2,"eval":{"pairs":16}}`
	rl := `{"data":{"task":"add2","heldout_examples":16},"iterations":4,"prompts":4,"group":4,"max_new_tokens":4,
		"eval_every":0,"eval":{"examples":16,"max_new_tokens":4,"before":false},"heartbeat_timeout":"10s"%s}`
	// Two shards per iteration, evaluated after each.
	overlapRL := strings.NewReplacer(`"eval_every":0`, `"eval_every":1`, `"prompts":4,"group":4`, `"prompts":8,"group":16`).Replace(rl)
	demo := json.RawMessage(`{"steps":2,"step_duration":"10ms"}`)
	gated := func(name string, g workflows.GateSpec) workflows.PhaseSpec {
		return workflows.PhaseSpec{Name: name, Kind: "demo", Config: demo, Gate: &g}
	}
	for _, c := range []struct {
		name   string
		phases []workflows.PhaseSpec
		parent *workflows.Lineage
		steer  func(t *testing.T, c client.Client, id string) // what a person does while it runs
	}{
		{"sft-dpo", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)}, {Name: "dpo", Kind: "dpo", Config: json.RawMessage(dpo)}}, nil, nil},
		{"sft-reward", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)}, {Name: "rm", Kind: "reward", Config: json.RawMessage(rm)}}, nil, nil},
		{"grpo-sync-backtrack", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
			{Name: "grpo", Kind: "grpo", Config: json.RawMessage(fmt.Sprintf(rl, `,"inject_nan_at":2`))}}, nil, nil},
		{"grpo-async-backtrack", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
			{Name: "grpo", Kind: "grpo", Config: json.RawMessage(fmt.Sprintf(rl, `,"mode":"async","inject_nan_at":2`))}}, nil, nil},
		{"ppo", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
			{Name: "ppo", Kind: "ppo", Config: json.RawMessage(fmt.Sprintf(rl, ""))}}, nil, nil},
		// Sharded by reference (rl-sharded): two shards per iteration, async, self-correction over the
		// shards, a back-track while the next iteration's shards are in flight.
		{"grpo-sharded-async", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
			{Name: "grpo", Kind: "grpo", Config: json.RawMessage(strings.Replace(fmt.Sprintf(rl,
				`,"mode":"async","inject_nan_at":2,"rollout":{"shards":2},"self_correct":{"retries":1,"resample":true}`),
				`"prompts":4,"group":4`, `"prompts":8,"group":16`, 1))}}, nil, nil},
		// The paths runs take from rl-overlap on: async with the next iteration's shards scored beside
		// the step, evaluations every iteration (keep-best), a back-track on NaN with shards and their
		// scoring in flight; and sync with a back-track on regression. (The test server suggests
		// continue-as-new after every iteration, so their retains run inline.)
		{"grpo-overlap-async", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
			{Name: "grpo", Kind: "grpo", Config: json.RawMessage(fmt.Sprintf(overlapRL,
				`,"mode":"async","inject_nan_at":3,"rollout":{"shards":2},"self_correct":{"retries":1,"resample":true}`))}}, nil, nil},
		{"grpo-overlap-sync-regression", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
			{Name: "grpo", Kind: "grpo", Config: json.RawMessage(fmt.Sprintf(overlapRL, `,"inject_regression_at":3,"rollout":{"shards":2}`))}}, nil, nil},
		// Deep async (rl-deep-async): four iterations in flight, partial generations in two shards
		// continuing under each new policy, a back-track on NaN draining the queue.
		{"grpo-deep-partial", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
			{Name: "grpo", Kind: "grpo", Config: json.RawMessage(strings.NewReplacer(`"iterations":4`, `"iterations":6`, `"max_new_tokens":4,`, `"max_new_tokens":8,`).Replace(fmt.Sprintf(overlapRL,
				`,"mode":"async","max_staleness":4,"partial":true,"segment_tokens":2,"inject_nan_at":4,"rollout":{"shards":2}`)))}}, nil, nil},
		// Steering (temper-steer): a set forwarded by the pipeline to the grpo phase, a pause and a
		// resume; gates: approval (approved), when: passing, skipping and stopping; a fork's lineage.
		{"grpo-steer", []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
			{Name: "grpo", Kind: "grpo", Config: json.RawMessage(fmt.Sprintf(rl, ""))}}, nil, recordSteer},
		{"gates", []workflows.PhaseSpec{{Name: "a", Kind: "demo", Config: demo},
			gated("b", workflows.GateSpec{Require: "approval"}), gated("c", workflows.GateSpec{When: "steps >= 1"}),
			gated("d", workflows.GateSpec{When: "steps > 100", Else: "skip"}), gated("e", workflows.GateSpec{When: "a.steps > 100"})}, nil, recordApprove},
		{"fork", []workflows.PhaseSpec{{Name: "a", Kind: "demo", From: "file:///tmp/parent/runs/p/a/step-000002/", Config: demo}},
			&workflows.Lineage{Run: "p", Phase: "a", Step: 2, Checkpoint: "file:///tmp/parent/runs/p/a/step-000002/", Set: []string{"steps=2"}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := workflows.PipelineInput{Name: c.name, Store: "file://" + t.TempDir(), Seed: 3, Phases: c.phases, Parent: c.parent}
			id := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
			run := startID(t, env.Client, id, in)
			if c.steer != nil {
				c.steer(t, env.Client, id)
			}
			waitOut(t, run)
			record(t, env.Client, id, filepath.Join(historiesDir, c.name))
		})
	}
}

// recordSteer changes the grpo phase's learning rate and KL coefficient after iteration 1 and
// pauses it after iteration 2, then resumes it.
func recordSteer(t *testing.T, c client.Client, id string) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, err := steer(c, id, workflows.UpdateSet, workflows.SteerRequest{Phase: "grpo", Set: []string{"optimizer.lr=1e-5", "loss.kl_beta=0.02"}, At: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	if _, err := steer(c, id, workflows.UpdatePause, workflows.SteerRequest{At: 2}); err != nil {
		t.Fatal(err)
	}
	waitPaused(t, c, id+".grpo")
	if _, err := steer(c, id, workflows.UpdateResume, workflows.SteerRequest{}); err != nil {
		t.Fatal(err)
	}
}

// recordApprove approves the gate before phase b once the pipeline waits there.
func recordApprove(t *testing.T, c client.Client, id string) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := steer(c, id, workflows.UpdateApprove, workflows.SteerRequest{Note: "recorded"}); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// record writes the history of every execution of run id (and its children) under dir.
func record(t *testing.T, c client.Client, id, dir string) {
	t.Helper()
	resp, err := c.ListWorkflow(context.Background(), workflowListRequest{query: fmt.Sprintf("WorkflowId = '%s' OR WorkflowId STARTS_WITH '%s.'", id, id)}.build())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var execs []storedExecution
	for i, ex := range resp.Executions {
		h := history(t, c, ex.Execution.WorkflowId, ex.Execution.RunId)
		b, err := temporalproto.CustomJSONMarshalOptions{Indent: " "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		suffix := strings.TrimPrefix(strings.TrimPrefix(ex.Execution.WorkflowId, id), ".")
		if suffix == "" {
			suffix = "pipeline"
		}
		name := fmt.Sprintf("%02d-%s.json", i, suffix)
		if err := os.WriteFile(filepath.Join(dir, name), append(bytes.TrimSpace(b), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		execs = append(execs, storedExecution{File: name, WorkflowID: ex.Execution.WorkflowId, RunID: ex.Execution.RunId, Type: ex.Type.GetName()})
	}
	b, _ := json.MarshalIndent(execs, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "index.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d executions recorded", dir, len(execs))
}
