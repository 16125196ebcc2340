package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// rlPipeline is a tiny sft → grpo pipeline; extra is merged into the grpo config.
func rlPipeline(t *testing.T, extra string) workflows.PipelineInput {
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":300,"heldout_examples":16},
		"batch":{"rows":8,"seq":32},"steps":6,"chunk_steps":6,"eval":{"examples":16,"max_new_tokens":4,"before":false}}`
	grpo := map[string]any{}
	base := `{"data":{"task":"add2","heldout_examples":16},"iterations":4,"prompts":4,"group":4,"max_new_tokens":4,
		"eval_every":0,"eval":{"examples":16,"max_new_tokens":4,"before":false},"heartbeat_timeout":"10s"}`
	for _, s := range []string{base, extra} {
		if s == "" {
			continue
		}
		if err := json.Unmarshal([]byte(s), &grpo); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := json.Marshal(grpo)
	return workflows.PipelineInput{Name: "rl", Store: "file://" + t.TempDir(), Seed: 3, Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
		{Name: "grpo", Kind: "grpo", Config: g},
	}}
}

// TestRLBacktracksOnNaN forces a non-finite update at iteration 2: the loop must restore the last good
// checkpoint, record the branch as a marker event, and finish.
func TestRLBacktracksOnNaN(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	run := start(t, env.Client, rlPipeline(t, `{"inject_nan_at": 2}`))
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	m := out.Phases[1].Metrics
	if m["backtracks"] != 1 || m["iterations"] != 4 {
		t.Fatalf("want one back-track over 4 iterations, got %v", m)
	}
	// Nothing was evaluated before the NaN, so the last good checkpoint is the SFT one (version 0): the
	// two iterations after the back-track make version 2, in branch directory grpo.b1.
	if m["version"] != 2 || !contains(out.Phases[1].Checkpoint, "/grpo.b1/step-000002/") {
		t.Fatalf("final checkpoint %s, version %v", out.Phases[1].Checkpoint, m["version"])
	}
	markers := 0
	it := env.Client.GetWorkflowHistory(context.Background(), run.GetID()+".grpo", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "SideEffect" {
			markers++
		}
	}
	// The phase may have continued as new before back-tracking; the branch marker is in the run that
	// back-tracked, so look through every run of the phase.
	if markers == 0 {
		markers = countMarkersAllRuns(t, env, run.GetID()+".grpo")
	}
	if markers != 1 {
		t.Fatalf("want 1 branch marker, got %d", markers)
	}
	// The rest of the phase ran as the child workflow .grpo.b1, started from the last good checkpoint.
	assertBranchChild(t, env, run.GetID()+".grpo", 1)
	replayAll(t, env.Client, run.GetID())
}

// TestRLAsyncCompletes runs the async mode (generation of k+1 overlaps training of k).
func TestRLAsyncCompletes(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	in := rlPipeline(t, `{"mode": "async", "optimizer": {"lr": 0.0004, "warmup_steps": 4}}`)
	run := start(t, env.Client, in)
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	m := out.Phases[1].Metrics
	if m["iterations"] != 4 || m["version"] != 4 || m["backtracks"] != 0 {
		t.Fatalf("async run: %v", m)
	}
	// The policy steps used the warmup schedule (each version's state records its step's lr):
	// version 2 was made by iteration 1 (lr/2), version 4 by iteration 3 (the full lr).
	for v, want := range map[int]float64{2: 0.0002, 4: 0.0004} {
		files, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(in.Store, "file://"), "runs", "*", "grpo", fmt.Sprintf("step-%06d", v), "state.json"))
		if len(files) != 1 {
			t.Fatalf("version %d: state files %v", v, files)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Scalars map[string]float64 `json:"scalars"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if math.Abs(st.Scalars["lr"]-want) > 1e-12 {
			t.Errorf("version %d trained at lr %g, want %g", v, st.Scalars["lr"], want)
		}
	}
	// Throughput and the time breakdown are reported (the issue asks for tokens/s per phase).
	for _, k := range []string{"rollout_tokens_per_s", "train_tokens_per_s", "seconds_per_iteration", "seconds_policy_step"} {
		if !(m[k] > 0) {
			t.Errorf("%s = %v, want > 0", k, m[k])
		}
	}
}

func countMarkersAllRuns(t *testing.T, env *testenv.Env, id string) int {
	t.Helper()
	resp, err := env.Client.ListWorkflow(context.Background(), workflowListRequest{query: "WorkflowId = '" + id + "'"}.build())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ex := range resp.Executions {
		for _, e := range history(t, env.Client, id, ex.Execution.RunId).Events {
			if a := e.GetMarkerRecordedEventAttributes(); a != nil && a.GetMarkerName() == "SideEffect" {
				n++
			}
		}
	}
	return n
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestRLSelfCorrection: failed samples are regenerated with the verifier's feedback, and the
// corrections that pass are kept as prompt → completion data under the original prompt. The model
// after 6 SFT steps samples nearly uniform bytes, so the reward (an ASCII first byte) fails about half
// of the samples and about half of their retries pass.
func TestRLSelfCorrection(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	for _, resample := range []bool{false, true} {
		t.Run(fmt.Sprintf("resample=%v", resample), func(t *testing.T) {
			in := rlPipeline(t, fmt.Sprintf(`{"iterations": 2, "reward": {"verifiers": [{"name": "format", "params": {"regex": ["^[\\x00-\\x7f]"]}}]},
		"self_correct": {"retries": 2, "max_samples": 8, "resample": %v}}`, resample))
			selfCorrectionRun(t, env, in, resample)
		})
	}
}

func selfCorrectionRun(t *testing.T, env *testenv.Env, in workflows.PipelineInput, resample bool) {
	run := start(t, env.Client, in)
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	m := out.Phases[1].Metrics
	tried, passed := m["self_corrections_tried"], m["self_corrections_passed"]
	// 2 iterations × up to 8 first-round retries, plus second rounds of what failed again.
	if tried < 8 || passed < 1 || passed > tried {
		t.Fatalf("self-corrections tried %v, passed %v (metrics %v)", tried, passed, m)
	}
	files, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(in.Store, "file://"), "runs", "*", "grpo", "corrections", "*.jsonl"))
	kept := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var ex struct{ Prompt, Completion string }
			if err := json.Unmarshal([]byte(line), &ex); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if strings.Contains(ex.Prompt, "feedback") || !strings.HasSuffix(ex.Prompt, "=") || ex.Completion == "" || ex.Completion[0] >= 0x80 {
				t.Errorf("%s: kept %+v: want the original prompt and a passing completion", f, ex)
			}
			kept++
		}
	}
	t.Logf("self-corrections: %v tried, %v passed, %d kept in %d files", tried, passed, kept, len(files))
	// A retry's prompt carries the first answer and the feedback, unless it resamples the original.
	retries, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(in.Store, "file://"), "runs", "*", "grpo", "rollouts", "*-retry1.jsonl"))
	if len(retries) == 0 {
		t.Fatal("no retry rollouts written")
	}
	b, err := os.ReadFile(retries[0])
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Prompt       string `json:"prompt"`
		PromptTokens []int  `json:"prompt_tokens"`
		Feedback     string `json:"feedback"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(string(b), "\n", 2)[0]), &r); err != nil {
		t.Fatal(err)
	}
	if long := len(r.PromptTokens) > len(r.Prompt)+len(r.Feedback); long == resample || r.Feedback == "" {
		t.Errorf("resample=%v: retry of %q has %d prompt tokens (feedback %q)", resample, r.Prompt, len(r.PromptTokens), r.Feedback)
	}
	if float64(kept) != passed {
		t.Errorf("kept %d examples in %v, want the %v that passed", kept, files, passed)
	}
	replayAll(t, env.Client, run.GetID())
}

// TestRLBacktracksOnRegression: an evaluation read as a regression (inject_regression_at) branches
// like a NaN does: the rest of the phase runs as the child workflow .grpo.b1 from the last good
// checkpoint (version 1, evaluated after iteration 1), so 4 iterations end on version 3.
func TestRLBacktracksOnRegression(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	run := start(t, env.Client, rlPipeline(t, `{"eval_every": 1, "inject_regression_at": 2}`))
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	m := out.Phases[1].Metrics
	if m["backtracks"] != 1 || m["iterations"] != 4 || m["version"] != 3 || !contains(out.Phases[1].Checkpoint, "/grpo.b1/step-000003/") {
		t.Fatalf("ended at %s with %v: want one back-track over 4 iterations, version 3 in grpo.b1", out.Phases[1].Checkpoint, m)
	}
	assertBranchChild(t, env, run.GetID()+".grpo", 1)
	replayAll(t, env.Client, run.GetID())
}

// assertBranchChild checks that branch n of the phase workflow ran as its child workflow phase.bN.
func assertBranchChild(t *testing.T, env *testenv.Env, phase string, n int) {
	t.Helper()
	b, err := env.Client.DescribeWorkflowExecution(context.Background(), fmt.Sprintf("%s.b%d", phase, n), "")
	if err != nil {
		t.Fatalf("branch workflow: %v", err)
	}
	if p := b.GetWorkflowExecutionInfo().GetParentExecution(); p.GetWorkflowId() != phase {
		t.Errorf("branch's parent %v, want the phase %s", p, phase)
	}
}

// TestAgenticRL (issue 19): SFT on bigmul's tool-use demonstrations, then GRPO on episodes with
// calc and check. Every rollout is an episode posed as a chat (its summary and policy mask are in
// the store), the policy step logs the episode metrics, and evaluations run episodes.
func TestAgenticRL(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	sft := `{"model":{"preset":"tiny"},"data":{"task":"bigmul","tool_demos":true,"train_examples":40,"heldout_examples":4},
		"batch":{"rows":4,"seq":160},"steps":4,"chunk_steps":4,"eval":{"examples":4,"max_new_tokens":16,"tools":["calc"],"max_turns":2,"before":false}}`
	grpo := `{"data":{"task":"bigmul","heldout_examples":4},"iterations":2,"prompts":2,"group":2,"max_new_tokens":16,
		"rollout":{"tools":["calc","check"],"max_turns":2},"eval_every":0,"eval":{"examples":4,"before":false},"heartbeat_timeout":"10s"}`
	store := t.TempDir()
	in := workflows.PipelineInput{Name: "agentic", Store: "file://" + store, Seed: 5, Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
		{Name: "grpo", Kind: "grpo", Config: json.RawMessage(grpo)},
	}}
	run := start(t, env.Client, in)
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	for _, ph := range out.Phases {
		if _, ok := ph.Metrics["heldout_turns"]; !ok {
			t.Errorf("%s: evaluated without episodes: %v", ph.Name, ph.Metrics)
		}
	}
	b, err := os.ReadFile(filepath.Join(store, "runs", run.GetID(), "grpo", "rollouts", "iter-000001-s0000.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d rollouts, want 4", len(lines))
	}
	for _, l := range lines {
		var r struct {
			PromptTokens []int           `json:"prompt_tokens"`
			Tokens       []int           `json:"tokens"`
			Policy       []bool          `json:"policy"`
			Episode      json.RawMessage `json:"episode"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Policy) != len(r.Tokens) || len(r.Episode) == 0 || r.PromptTokens[1] != '<' /* [BOS] <|user|> ... */ {
			t.Fatalf("rollout is not an episode posed as a chat: %s", l)
		}
	}
	log, err := os.ReadFile(filepath.Join(store, "runs", run.GetID(), "grpo", "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"episode_turns"`) {
		t.Fatalf("no episode metrics in the policy steps' log:\n%s", log)
	}
}

// TestRLAsyncScoresBesideStep checks the async loop's overlap in its history: every shard generated
// beside a policy step is scored in the workflow task that learns of its rollouts (so its scoring
// runs while the step trains, instead of after it), each run of the phase replays, and the phase
// reports where its time went. Taking the scoring back behind the step (the workflow waiting for the
// step before it starts the Score) fails it whenever the generation ends first, as it does here.
func TestRLAsyncScoresBesideStep(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	in := rlPipeline(t, `{"mode": "async", "iterations": 4, "prompts": 4, "group": 2, "epochs": 3}`)
	run := start(t, env.Client, in)
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if m := out.Phases[1].Metrics; m["iterations"] != 4 || m["version"] != 4 {
		t.Fatalf("async run: %v", m)
	}
	for _, k := range []string{"seconds_step_optimize", "seconds_step_commit", "seconds_step_load", "seconds_step_queued"} {
		if _, ok := out.Phases[1].Metrics[k]; !ok {
			t.Errorf("phase metrics lack %s", k)
		}
	}
	// The test server continues the phase as new every few iterations: look through every run. A run's
	// first workflow task scores the shards the run before it left generated (RLState.PendingShards).
	resp, err := env.Client.ListWorkflow(context.Background(), workflowListRequest{query: "WorkflowId = '" + run.GetID() + ".grpo'"}.build())
	if err != nil {
		t.Fatal(err)
	}
	type sched struct {
		name  string
		input []byte
	}
	scored := map[string]bool{}
	for _, ex := range resp.Executions {
		scheduled := map[int64]sched{}
		var completed []string       // rollouts objects of the generations completed since the last workflow task
		var started []string         // those the workflow task in progress learned of
		seen := map[int64][]string{} // workflow task (its completed event) → the generations it learned of
		var firstTask int64
		for _, e := range history(t, env.Client, ex.Execution.WorkflowId, ex.Execution.RunId).Events {
			switch {
			case e.GetActivityTaskScheduledEventAttributes() != nil:
				a := e.GetActivityTaskScheduledEventAttributes()
				s := sched{name: a.GetActivityType().GetName(), input: a.GetInput().GetPayloads()[0].GetData()}
				scheduled[e.GetEventId()] = s
				if s.name != rewardapi.ScoreName {
					continue
				}
				var si rewardapi.ScoreInput
				if err := json.Unmarshal(s.input, &si); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(si.Rollouts, "iter-000000-") || a.GetWorkflowTaskCompletedEventId() == firstTask {
					continue // the first iteration has no step beside it; a run's first task scores what it inherited
				}
				scored[si.Rollouts] = true
				if !slices.Contains(seen[a.GetWorkflowTaskCompletedEventId()], si.Rollouts) {
					t.Errorf("score of %s scheduled in a workflow task that learned of generations %v, not of it",
						si.Rollouts, seen[a.GetWorkflowTaskCompletedEventId()])
				}
			case e.GetActivityTaskCompletedEventAttributes() != nil:
				a := e.GetActivityTaskCompletedEventAttributes()
				if scheduled[a.GetScheduledEventId()].name == rolloutapi.GenerateName {
					var g rolloutapi.GenerateOutput
					if err := json.Unmarshal(a.GetResult().GetPayloads()[0].GetData(), &g); err != nil {
						t.Fatal(err)
					}
					completed = append(completed, g.Rollouts)
				}
			case e.GetWorkflowTaskStartedEventAttributes() != nil:
				started, completed = completed, nil
			case e.GetWorkflowTaskCompletedEventAttributes() != nil:
				seen[e.GetEventId()] = started
				if firstTask == 0 {
					firstTask = e.GetEventId()
				}
			}
		}
	}
	if len(scored) == 0 {
		t.Fatalf("no score of a generation beside a step in %d runs of the phase", len(resp.Executions))
	}
	replayAll(t, env.Client, run.GetID())
}
