package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/rollout"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/tools/toolsapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// pythonPolicy is a policy engine whose first turn calls python (a program that sleeps, then
// prints a number that depends on the prompt) and whose second turn answers with the tool's
// output: the model is the only stand-in here; its checkpoint loading, the rollout activity, the
// ToolCall workflow, the tools worker and the sandbox are the real ones.
type pythonPolicy struct{ train.Engine }

func (p pythonPolicy) Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error) {
	enc := train.Encoder()
	open, _ := enc.Chat.ToolMarkers()
	out := make([]model.Completion, len(prompts))
	for i, pr := range prompts {
		ctx := enc.Tok.Decode(pr)
		var text string
		if j := strings.LastIndex(ctx, open); j >= 0 {
			text, _, _ = strings.Cut(ctx[j+len(open):], "\n") // the answer: the tool's output

		} else {
			code, _ := json.Marshal(fmt.Sprintf("import time\ntime.sleep(3)\nprint(%d * 1000 + 7)", len(ctx)))
			text = `<tool>{"name":"python","arguments":{"code":` + string(code) + `}}</tool>`
		}
		toks := enc.Tok.Encode(text)
		if !strings.Contains(text, "<tool>") {
			toks = append(toks, tokenize.ByteEOS)
		}
		toks = toks[:min(len(toks), opts.MaxNewTokens)]
		lp := make([]float32, len(toks))
		for j := range lp {
			lp[j] = -0.5
		}
		out[i] = model.Completion{Tokens: toks, LogProbs: lp, StopReason: sample.StopToken}
	}
	return out, nil
}

const toolKillQueue = "tool-kill-test"

// toolKillProbe runs one rollout.Generate (the episodes of an RL iteration) on the rollout queue.
func toolKillProbe(ctx workflow.Context, in rolloutapi.GenerateInput) (rolloutapi.GenerateOutput, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: workflows.QueueRollout, StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout: 10 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
	var out rolloutapi.GenerateOutput
	err := workflow.ExecuteActivity(ctx, rolloutapi.GenerateName, in).Get(ctx, &out)
	return out, err
}

// TestToolWorkerKilledMidCall: episodes whose policy calls the long-running python tool run each
// call as a ToolCall workflow whose tools.Run activity runs on a tools worker process; that worker
// is killed with SIGKILL while the programs run (and restarted). The calls are retried on the new
// worker (attempt 2), the episodes complete with the programs' output, and the rollouts are
// byte-identical to an undisturbed run's.
func TestToolWorkerKilledMidCall(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("subprocess test; runs in CI and without -short")
	}
	sb, err := sandbox.New(sandbox.Config{BaseDir: t.TempDir()})
	if err != nil || sb.Config().Python == "" {
		t.Skipf("no code sandbox with python here: %v", err)
	}
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper, workflows.QueueTrainer)
	dir := t.TempDir()
	store := "file://" + dir
	base := waitRun(t, mustStart(t, env.Client, fmt.Sprintf("tool-kill-base-%d", time.Now().UnixNano()), rlSFTPipeline(store)))
	from := base.Phases[0].Checkpoint

	// The rollout worker with the scripted policy, and a workflow worker for the probe.
	newEngine := workers.NewTrainEngine(workers.EngineOptions{})
	ro := &rollout.Activities{Ckpt: ckpt.New(ckpt.Options{}), Tools: workers.ToolDispatcher{},
		NewEngine: func(o train.EngineOptions) (train.Engine, error) {
			eng, err := newEngine(o)
			return pythonPolicy{eng}, err
		}}
	rw := worker.New(env.Client, workflows.QueueRollout, worker.Options{})
	rw.RegisterActivityWithOptions(ro.Generate, activity.RegisterOptions{Name: rolloutapi.GenerateName})
	pw := worker.New(env.Client, toolKillQueue, worker.Options{})
	pw.RegisterWorkflow(toolKillProbe)
	for _, w := range []worker.Worker{rw, pw} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}
	tools := &workerProcess{t: t, role: workflows.QueueTools, addr: env.Server.FrontendAddr(), logs: filepath.Join(dir, "tools.log")}
	tools.start()
	t.Cleanup(func() { tools.kill() })

	ids := fmt.Sprintf("tool-kill-%d", time.Now().UnixNano())
	generate := func(run string) (rolloutapi.GenerateOutput, []byte) {
		t.Helper()
		in := rolloutapi.GenerateInput{Store: store, Run: run, Phase: "grpo", Checkpoint: from, Iteration: 1,
			Data: trainapi.DataSpec{Task: "add2", HeldoutExamples: 4}, Seed: 3, Prompts: 2, Group: 2, MaxNewTokens: 160, Temperature: 1,
			Tools: []string{"python"}, MaxTurns: 2}
		r, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: run, TaskQueue: toolKillQueue}, toolKillProbe, in)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var out rolloutapi.GenerateOutput
		if err := r.Get(ctx, &out); err != nil {
			t.Fatalf("%s: %v (tools worker log: %s)", run, err, readLog(filepath.Join(dir, "tools.log")))
		}
		b, err := os.ReadFile(strings.TrimPrefix(out.Rollouts, "file://"))
		if err != nil {
			t.Fatal(err)
		}
		return out, b
	}
	start := time.Now()
	_, clean := generate(ids + "-clean")
	t.Logf("clean run %.1fs", time.Since(start).Seconds())

	// The killed run: kill the tools worker once a tools.Run attempt is running, start a new one.
	done := make(chan []byte, 1)
	go func() { _, b := generate(ids + "-killed"); done <- b }()
	calls := waitStartedToolCalls(t, env.Client, ids+"-killed", 2)
	time.Sleep(500 * time.Millisecond)
	tools.kill()
	t.Logf("killed the tools worker with %d calls running", len(calls))
	tools.start()
	var killed []byte
	select {
	case killed = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the killed run did not finish")
	}
	if string(killed) != string(clean) {
		t.Fatalf("rollouts differ after the kill:\nclean  %s\nkilled %s", clean, killed)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(clean)), "\n") {
		var r struct {
			Prompt     string `json:"prompt"`
			Completion string `json:"completion"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Completion == "" || strings.Contains(r.Completion, "error") || strings.Trim(r.Completion, "0123456789") != "" {
			t.Fatalf("episode answered %q: want the program's number", r.Completion)
		}
	}
	for _, id := range calls {
		var out toolsapi.RunOutput
		if err := env.Client.GetWorkflow(context.Background(), id, "").Get(context.Background(), &out); err != nil {
			t.Fatal(err)
		}
		if out.Attempt < 2 || out.Error != "" {
			t.Fatalf("%s: %+v: want a later attempt's result", id, out)
		}
	}
}

// waitStartedToolCalls waits until n ToolCall workflows of run have their tools.Run activity
// started, and returns their IDs.
func waitStartedToolCalls(t *testing.T, c client.Client, run string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.ToolCallName)})
		if err == nil {
			var ids []string
			for _, e := range resp.Executions {
				id := e.Execution.WorkflowId
				if !strings.HasPrefix(id, run+".") {
					continue
				}
				d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
				if err != nil {
					continue
				}
				for _, pa := range d.PendingActivities {
					if pa.State == enumspb.PENDING_ACTIVITY_STATE_STARTED {
						ids = append(ids, id)
					}
				}
			}
			if len(ids) >= n {
				return ids
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %d started tool calls of %s", n, run)
	return nil
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
