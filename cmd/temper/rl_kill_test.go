package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// rlGRPOConfig is a tiny sync-mode GRPO phase with enough iterations that a kill lands mid-run; the
// heartbeat timeout bounds how long a killed attempt holds up the run. A barely trained model never
// solves add2 exactly, and all-zero rewards give zero advantages and no update, so the reward is a
// format check that its random completions meet only sometimes: the weights really move.
const rlGRPOConfig = `{"data":{"task":"add2","heldout_examples":16},"mode":"sync","iterations":7,"prompts":8,"group":4,
	"max_new_tokens":8,"reward":{"verifiers":[{"name":"format","params":{"regex":["[0-9]","^[0-9]"]}}]},
	"eval_every":0,"eval":{"examples":16,"max_new_tokens":4,"before":false},"heartbeat_timeout":"4s"}`

func rlSFTPipeline(store string) workflows.PipelineInput {
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":300,"heldout_examples":16},
		"batch":{"rows":8,"seq":32},"steps":6,"chunk_steps":6,"eval":{"examples":16,"max_new_tokens":4,"before":false}}`
	return workflows.PipelineInput{Name: "rl-base", Store: store, Seed: 3, Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
	}}
}

func rlGRPOPipeline(store, from string) workflows.PipelineInput {
	return rlGRPOPipelineWith(store, from, rlGRPOConfig)
}

func rlGRPOPipelineWith(store, from, cfg string) workflows.PipelineInput {
	return workflows.PipelineInput{Name: "rl-kill", Store: store, Seed: 3, Phases: []workflows.PhaseSpec{
		{Name: "grpo", Kind: "grpo", From: from, Config: json.RawMessage(cfg)},
	}}
}

// TestRLExactResumeAfterSIGKILL runs the same sync-mode GRPO phase twice with the rollout and trainer
// roles in their own worker processes: once undisturbed, once with the rollout worker killed by SIGKILL
// during a rollout.Generate and the trainer worker killed during a train.PolicyStep (each restarted).
// The killed run must complete with those activities retried, write the same rollouts for every
// iteration, and end on byte-identical weights and optimizer state.
func TestRLExactResumeAfterSIGKILL(t *testing.T) {
	rlExactResume(t, rlSFTPipeline, rlGRPOConfig, nil)
}

// rlDeepPartialConfig is rlGRPOConfig in deep async mode: four iterations generating ahead, each
// generation in segments of two tokens continued under every newer policy (docs/async.md).
var rlDeepPartialConfig = strings.Replace(rlGRPOConfig, `"mode":"sync"`, `"mode":"async","max_staleness":4,"partial":true,"segment_tokens":2`, 1)

// TestRLDeepAsyncExactResumeAfterSIGKILL is the same for deep async with partial generations
// (issue 42): a rollout worker killed during a segment and the trainer killed mid-step end on the
// same segments, weights and optimizer state as an undisturbed run: the schedule is a function of
// the iteration and max_staleness alone, and a segment of its input.
func TestRLDeepAsyncExactResumeAfterSIGKILL(t *testing.T) {
	rlExactResume(t, rlSFTPipeline, rlDeepPartialConfig, nil)
}

// agenticSFTConfig teaches the tiny model the tool-call template on bigmul demonstrations: after
// these steps nearly every episode calls calc (the test checks), though it copies few digits.
const agenticSFTConfig = `{"model":{"preset":"tiny"},"data":{"task":"bigmul","tool_demos":true,"train_examples":200,"heldout_examples":16},
	"batch":{"rows":8,"seq":160},"steps":150,"chunk_steps":150,"optimizer":{"lr":0.01,"warmup_steps":10},
	"eval":{"examples":16,"max_new_tokens":64,"tools":["calc"],"max_turns":2,"before":false}}`

// agenticGRPOConfig is GRPO on calc/check episodes, scored with digit credit so that rewards differ
// within a group and the weights move.
const agenticGRPOConfig = `{"data":{"task":"bigmul","heldout_examples":16},"mode":"sync","iterations":7,"prompts":4,"group":4,
	"max_new_tokens":64,"rollout":{"tools":["calc","check"],"max_turns":2},
	"reward":{"verifiers":[{"name":"exact"},{"name":"digits","weight":0.5}]},
	"eval_every":0,"eval":{"examples":16,"before":false},"heartbeat_timeout":"4s"}`

// TestAgenticRLExactResumeAfterSIGKILL is the same for agentic episodes (issue 19): rollouts are
// multi-turn episodes whose calc and check calls run inside the rollout activity; killing the
// rollout worker mid-iteration and the trainer mid-step ends on the same rollouts, weights and
// optimizer state as an undisturbed run.
func TestAgenticRLExactResumeAfterSIGKILL(t *testing.T) {
	base := func(store string) workflows.PipelineInput {
		return workflows.PipelineInput{Name: "agentic-base", Store: store, Seed: 3, Phases: []workflows.PhaseSpec{
			{Name: "sft", Kind: "sft", Config: json.RawMessage(agenticSFTConfig)},
		}}
	}
	rlExactResume(t, base, agenticGRPOConfig, func(t *testing.T, base workflows.PipelineOutput, rollouts []byte) {
		if calls := base.Phases[0].Metrics["heldout_tool_calls"]; calls < 0.5 {
			t.Fatalf("the base makes %.2f tool calls per episode: the episodes would not exercise tools", calls)
		}
		if n := strings.Count(string(rollouts), `"tool_calls":`); n == 0 || !strings.Contains(string(rollouts), `"tool_calls":1`) {
			t.Fatalf("no episode of the first iteration called a tool (%d summaries)", n)
		}
	})
}

// rlKillBase starts the workflow, reward and rollout roles in this process and the trainer as a
// subprocess (to be killed), runs the GRPO tests' SFT base, and returns the stack, the store, the
// trainer, a run-id prefix unique to this run and the base's checkpoint.
func rlKillBase(t *testing.T, prefix string) (env *testenv.Env, store string, trainer *workerProcess, ids, from string) {
	t.Helper()
	env, dir := killTestEnv(t, workflows.QueueTemper, workflows.QueueReward, workflows.QueueRollout)
	store = "file://" + dir
	trainer = startWorker(t, env, workflows.QueueTrainer, dir, "trainer")
	ids = fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	from = waitRun(t, mustStart(t, env.Client, ids+"-base", rlSFTPipeline(store))).Phases[0].Checkpoint
	return env, store, trainer, ids, from
}

// rlExactResume runs base, then the GRPO phase grpoCfg from its checkpoint twice (undisturbed, and
// with a rollout and a trainer worker killed mid-activity), and compares them; check, when set,
// looks at the base's result and the first iteration's rollouts.
func rlExactResume(t *testing.T, basePipeline func(store string) workflows.PipelineInput, grpoCfg string,
	check func(t *testing.T, base workflows.PipelineOutput, rollouts []byte)) {
	// Workflows and rewards run in this process; what is killed is the trainer and the rollout worker.
	env, dir := killTestEnv(t, workflows.QueueTemper, workflows.QueueReward)
	store := "file://" + dir
	trainer := startWorker(t, env, workflows.QueueTrainer, dir, "trainer")
	roll := startWorker(t, env, workflows.QueueRollout, dir, "rollout")

	run := func(id string, in workflows.PipelineInput) client.WorkflowRun {
		return mustStart(t, env.Client, id, in)
	}
	// IDs unique per invocation: with -count=N the shared server still holds the earlier runs, and a
	// describe of a child not started yet would answer with the old one.
	ids := fmt.Sprintf("rl-kill-%d", time.Now().UnixNano())
	start := time.Now()
	base := waitRun(t, run(ids+"-base", basePipeline(store)))
	from := base.Phases[0].Checkpoint
	t.Logf("base SFT checkpoint %s in %.1fs (%v)", from, time.Since(start).Seconds(), base.Phases[0].Metrics)

	start = time.Now()
	clean := waitRun(t, run(ids+"-clean", rlGRPOPipelineWith(store, from, grpoCfg)))
	t.Logf("clean GRPO run in %.1fs; activity durations %v", time.Since(start).Seconds(), rlActivityDurations(t, env.Client, ids+"-clean.grpo"))
	if check != nil {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rolloutapi.RolloutsKey(clean.RunID, "grpo", 0, rolloutapi.ShardTag(0)))))
		if err != nil {
			t.Fatal(err)
		}
		check(t, base, b)
	}

	start = time.Now()
	r := run(ids+"-killed", rlGRPOPipelineWith(store, from, grpoCfg))
	wfID := ids + "-killed.grpo"
	// Kill the rollout worker while iteration 2's rollouts are being generated, and the trainer while
	// iteration 4's policy step runs: the next worker process must redo each from its input alone.
	kills := []struct {
		p        *workerProcess
		activity string
		iter     int
	}{
		{roll, rolloutapi.GenerateName, 2},
		{trainer, trainapi.PolicyStepName, 4},
	}
	for _, k := range kills {
		iter := killMidActivity(t, env.Client, k.p, wfID, k.activity, k.iter, 7)
		t.Logf("the kill during iteration %d landed %.1fs into the run", iter, time.Since(start).Seconds())
	}
	killed := waitRun(t, r)
	t.Logf("killed GRPO run in %.1fs", time.Since(start).Seconds())

	retried := rlRetried(t, env.Client, wfID)
	for _, k := range kills {
		if retried[k.activity] < 1 {
			t.Errorf("want %s retried after its worker was killed, got retries %v", k.activity, retried)
		}
	}
	if m := killed.Phases[0].Metrics; m["iterations"] != 7 || m["version"] != 7 || m["backtracks"] != 0 {
		t.Errorf("killed run metrics %v", m)
	}
	for _, k := range []string{"reward_mean", "last_reward_mean", "heldout_exact_match"} {
		if a, b := clean.Phases[0].Metrics[k], killed.Phases[0].Metrics[k]; a != b {
			t.Errorf("metric %s: clean %v, killed %v", k, a, b)
		}
	}
	// Rollouts are seeded per (iteration, prompt, sample): the retried Generate rewrote the same bytes
	// (every object of the rollouts directory: each iteration's, a partial run's segments, verdicts).
	ca, kb := rlRolloutHashes(t, dir, clean.RunID), rlRolloutHashes(t, dir, killed.RunID)
	for i := 0; i < 7; i++ {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(ca)), func(k string) bool { return strings.HasPrefix(k, fmt.Sprintf("iter-%06d-", i)) }) {
			t.Errorf("no rollouts of iteration %d in the clean run: %v", i, slices.Sorted(maps.Keys(ca)))
		}
	}
	if !maps.Equal(ca, kb) {
		t.Errorf("rollouts differ:\nclean  %v\nkilled %v", ca, kb)
	}
	a, b := clean.Phases[0].Checkpoint, killed.Phases[0].Checkpoint
	if a == b {
		t.Fatalf("both runs wrote the same checkpoint %s", a)
	}
	if m := clean.Phases[0].Metrics; m["reward_mean"] <= 0 || fileHash(t, from, trainapi.ModelFile) == fileHash(t, a, trainapi.ModelFile) {
		t.Fatalf("GRPO did not change the weights (reward_mean %v): the comparison would prove nothing", m["reward_mean"])
	}
	sameState(t, a, b, "after kills")
	t.Logf("final checkpoints %s and %s match (retries %v)", a, b, retried)
}

// killMidActivity kills worker p while the first attempt of activity runs in workflow wfID, in
// iteration from or a later one before last, restarts it, and returns the iteration whose activity the
// kill interrupted (a retry followed). A warm activity can finish between the poll that saw it and
// the kill, or between two polls; then the next iteration's is the target, until one kill lands.
func killMidActivity(t *testing.T, c client.Client, p *workerProcess, wfID, activity string, from, last int) int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for iter := from; ; {
		if iter >= last {
			t.Fatalf("no kill of the %s worker landed during a %s of %s", p.role, activity, wfID)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s of iteration %d of %s never started", activity, iter, wfID)
		}
		id, done := rlRunning(c, wfID, activity)
		if done > iter {
			iter = done
			continue
		}
		if done < iter || id == "" {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		p.kill()
		p.start()
		landed := rlAwaitRetry(t, c, wfID, id)
		t.Logf("SIGKILL of the %s worker during %s of iteration %d of %s: retried %v", p.role, activity, iter, wfID, landed)
		if landed {
			return iter
		}
		iter++
	}
}

// rlRunning returns the number of iterations the RL loop has completed (the "iteration" memo is
// upserted after each; -1 before the phase starts) and the activity ID of the first attempt of activity
// `name` if a worker is running it now, or "".
func rlRunning(c client.Client, wfID, name string) (string, int) {
	desc, err := c.DescribeWorkflowExecution(context.Background(), wfID, "")
	if err != nil {
		return "", -1
	}
	done := 0
	if p, ok := desc.WorkflowExecutionInfo.GetMemo().GetFields()["iteration"]; ok {
		if json.Unmarshal(p.Data, &done) != nil {
			return "", -1
		}
	}
	for _, pa := range desc.PendingActivities {
		if pa.ActivityType.GetName() == name && pa.State == enumspb.PENDING_ACTIVITY_STATE_STARTED && pa.Attempt == 1 {
			return pa.ActivityId, done
		}
	}
	return "", done
}

// rlAwaitRetry waits until activity id either reaches a second attempt (the kill interrupted it: true)
// or is no longer pending (it completed before the kill: false).
func rlAwaitRetry(t *testing.T, c client.Client, wfID, id string) bool {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		desc, err := c.DescribeWorkflowExecution(context.Background(), wfID, "")
		if err != nil {
			t.Fatalf("describe %s: %v", wfID, err)
		}
		pending := false
		for _, pa := range desc.PendingActivities {
			if pa.ActivityId == id {
				if pa.Attempt > 1 {
					return true
				}
				pending = true
			}
		}
		if !pending {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("activity %s of %s neither retried nor completed in 2 minutes", id, wfID)
	return false
}

// rlRetried counts, per activity type, the activities whose final attempt was not the first, in
// every run of the workflow (from the last back through its continue-as-new chain).
func rlRetried(t *testing.T, c client.Client, wfID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for runID := ""; ; {
		types := map[int64]string{}
		prev := ""
		it := c.GetWorkflowHistory(context.Background(), wfID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				prev = a.GetContinuedExecutionRunId()
			}
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				types[e.EventId] = a.ActivityType.GetName()
			}
			if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.Attempt > 1 {
				out[types[a.ScheduledEventId]]++
			}
		}
		if prev == "" {
			return out
		}
		runID = prev
	}
}

// rlRolloutHashes maps every object of a GRPO phase's rollouts directory to its sha256.
func rlRolloutHashes(t *testing.T, root, run string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "runs", run, "grpo", "rollouts", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rollouts of run %s (%v)", run, err)
	}
	out := map[string]string{}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		out[filepath.Base(f)] = rlHashKey(t, root, filepath.ToSlash(rel))
	}
	return out
}

// rlActivityDurations is the longest start-to-close time of each activity type in a run, so a
// failing kill schedule can be re-aimed from the log.
func rlActivityDurations(t *testing.T, c client.Client, wfID string) map[string]string {
	t.Helper()
	types := map[int64]string{}
	started := map[int64]time.Time{}
	longest := map[string]time.Duration{}
	it := c.GetWorkflowHistory(context.Background(), wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			types[e.EventId] = e.GetActivityTaskScheduledEventAttributes().ActivityType.GetName()
		case e.GetActivityTaskStartedEventAttributes() != nil:
			started[e.GetActivityTaskStartedEventAttributes().ScheduledEventId] = e.EventTime.AsTime()
		case e.GetActivityTaskCompletedEventAttributes() != nil:
			id := e.GetActivityTaskCompletedEventAttributes().ScheduledEventId
			if d := e.EventTime.AsTime().Sub(started[id]); d > longest[types[id]] {
				longest[types[id]] = d
			}
		}
	}
	out := map[string]string{}
	for k, d := range longest {
		out[k] = d.Round(time.Millisecond).String()
	}
	return out
}

func rlHashKey(t *testing.T, root, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
