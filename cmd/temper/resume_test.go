package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// workerProcess runs `temper worker --roles ROLE` as its own process (the test binary re-executed as
// temper), so that it can be killed with SIGKILL like a real worker on another host.
type workerProcess struct {
	t    *testing.T
	role string
	addr string
	logs string
	args []string // extra flags
	cmd  *exec.Cmd
}

func (p *workerProcess) start() {
	p.t.Helper()
	p.cmd = exec.Command(os.Args[0], append([]string{"worker", "--roles", p.role, "--temporal", p.addr}, p.args...)...)
	p.cmd.Env = append(os.Environ(), "TEMPER_TEST_MAIN=1")
	f, err := os.OpenFile(p.logs, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close() // the child holds its own descriptor
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s worker: %v", p.role, err)
	}
}

func (p *workerProcess) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// killTestEnv begins a SIGKILL test: skipped under -short outside CI, the embedded server with these
// roles' workers in this process, and a temporary directory for the store and the workers' logs.
func killTestEnv(t *testing.T, roles ...string) (*testenv.Env, string) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("subprocess test; runs in CI and without -short")
	}
	env := testenv.Get(t)
	env.Roles(t, roles...)
	return env, t.TempDir()
}

// startWorker runs role's worker as its own process, logging to dir/LOG.log, killed when the test ends.
func startWorker(t *testing.T, env *testenv.Env, role, dir, log string) *workerProcess {
	t.Helper()
	p := &workerProcess{t: t, role: role, addr: env.Server.FrontendAddr(), logs: filepath.Join(dir, log+".log")}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func resumePipeline(store string) workflows.PipelineInput {
	cfg := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":500,"heldout_examples":16},
	"batch":{"rows":32,"seq":128},"steps":60,"chunk_steps":10,"heartbeat_timeout":"2s",
	"eval":{"examples":16,"max_new_tokens":4,"before":false}}`
	return workflows.PipelineInput{Name: "resume", Store: store, Seed: 7, Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: []byte(cfg)},
	}}
}

// TestSFTExactResumeAfterSIGKILL runs the same SFT phase twice: once undisturbed, once with its trainer
// worker killed by SIGKILL at three random moments (and restarted). The final weights and optimizer
// state must be byte-identical.
func TestSFTExactResumeAfterSIGKILL(t *testing.T) {
	env, dir := killTestEnv(t, workflows.QueueTemper)
	store := "file://" + dir
	p := startWorker(t, env, workflows.QueueTrainer, dir, "trainer")

	run := func(id string) workflows.PipelineOutput {
		return waitRun(t, mustStart(t, env.Client, id, resumePipeline(store)))
	}
	clean := run("resume-clean")

	r, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "resume-killed", TaskQueue: workflows.QueueTemper},
		workflows.PipelineName, resumePipeline(store))
	if err != nil {
		t.Fatal(err)
	}
	// Kill in three random chunks (of the six) at a random moment: wait until the chunk has reported
	// its first step (heartbeats reach the server in batches, so later steps may never show), wait a
	// random 0-400 ms more, then SIGKILL the worker and start a new one. The batch is sized so that a
	// chunk lasts long enough to be seen pending: with 16×64 rows the faster engine finished whole
	// chunks between two polls on a loaded machine, and the test waited for a step it had missed.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	chunks := rng.Perm(6)[:3]
	slices.Sort(chunks)
	for i, c := range chunks {
		target := 10*c + 1
		deadline := time.Now().Add(2 * time.Minute)
		for chunkStep(env.Client, "resume-killed.sft") < target {
			if time.Now().After(deadline) {
				t.Fatalf("the run never reached step %d", target)
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		p.kill()
		t.Logf("SIGKILL %d of the trainer in chunk %d (steps %d-%d)", i+1, c+1, 10*c+1, 10*c+10)
		p.start()
	}
	killed := waitRun(t, r)
	if n := retriedActivities(t, env.Client, "resume-killed.sft"); n < 3 {
		t.Fatalf("want at least 3 retried activities after 3 kills, got %d", n)
	}

	a, b := clean.Phases[0].Checkpoint, killed.Phases[0].Checkpoint
	if a == b {
		t.Fatalf("both runs wrote the same checkpoint %s", a)
	}
	sameState(t, a, b, "after kills")
	t.Logf("final checkpoints %s and %s match", a, b)
}

// mustStart starts the pipeline workflow id the way `temper run` does.
func mustStart(t *testing.T, c client.Client, id string, in workflows.PipelineInput) client.WorkflowRun {
	t.Helper()
	r, err := pipeline.Start(context.Background(), c, id, in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func waitRun(t *testing.T, r client.WorkflowRun) workflows.PipelineOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out workflows.PipelineOutput
	if err := r.Get(ctx, &out); err != nil {
		t.Fatalf("run %s: %v", r.GetID(), err)
	}
	return out
}

// sameState fails t unless checkpoints a and b hold byte-identical weights and optimizer state;
// what says when they were compared ("after kills").
func sameState(t *testing.T, a, b, what string) {
	t.Helper()
	for _, name := range []string{trainapi.ModelFile, trainapi.OptimizerFile} {
		if ha, hb := fileHash(t, a, name), fileHash(t, b, name); ha != hb {
			t.Errorf("%s differs %s: %s vs %s", name, what, ha, hb)
		}
	}
}

func fileHash(t *testing.T, uri, name string) string {
	t.Helper()
	ck, err := ckpt.Read(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := ck.Manifest.File(name)
	if !ok {
		t.Fatalf("%s has no %s", uri, name)
	}
	if err := ck.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s (%d bytes)", f.SHA256, f.Size)
}

// chunkStep is the heartbeat step of the phase's running chunk activity, or -1.
func chunkStep(c client.Client, wfID string) int {
	desc, err := c.DescribeWorkflowExecution(context.Background(), wfID, "")
	if err != nil {
		return -1
	}
	for _, pa := range desc.PendingActivities {
		if pa.ActivityType.GetName() != trainapi.ChunkName || pa.HeartbeatDetails == nil || len(pa.HeartbeatDetails.Payloads) == 0 {
			continue
		}
		var p trainapi.Progress
		if json.Unmarshal(pa.HeartbeatDetails.Payloads[0].Data, &p) == nil {
			return p.Step
		}
	}
	return -1
}

// retriedActivities counts activity attempts after the first in every run of a workflow.
func retriedActivities(t *testing.T, c client.Client, wfID string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(context.Background(), wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.Attempt > 1 {
			n++
		}
	}
	return n
}
