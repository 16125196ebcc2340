package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// TestClusterModeRL is cluster mode without Docker, as scripts/cluster.sh runs it: `temper dev --roles
// none` serves only the Temporal server, one `temper worker` process per role does the work, and
// `temper run --wait` drives the tiny RL pipeline of scripts/cluster-rl.yaml to the end. The history
// must show every role's tasks handled by that role's own process, and none by the dev process.
func TestClusterModeRL(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("subprocess test; runs in CI and without -short")
	}
	home := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env := append(os.Environ(), "TEMPER_TEST_MAIN=1", "TEMPER_HOME="+home)

	dev := exec.Command(os.Args[0], "dev", "--roles", "none", "--home", home, "--port", fmt.Sprint(port), "--ui-port", "-1")
	dev.Env = env
	devLog, err := os.Create(filepath.Join(home, "dev.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer devLog.Close()
	dev.Stdout, dev.Stderr = devLog, devLog
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Process.Kill(); _ = dev.Wait() })
	for deadline := time.Now().Add(60 * time.Second); !workers.Reachable(addr); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("temper dev did not listen on %s", addr)
		}
	}

	rewardMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	procs := map[string]*workerProcess{}
	for _, role := range workflows.Roles {
		p := &workerProcess{t: t, role: role, addr: addr, logs: filepath.Join(home, role+".log")}
		if role == workflows.QueueReward {
			p.args = []string{"--metrics", rewardMetrics}
		}
		p.start()
		t.Cleanup(p.kill)
		procs[role] = p
	}

	const id = "cluster-rl-1"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, os.Args[0], "run", filepath.Join("..", "..", "scripts", "cluster-rl.yaml"),
		"--temporal", addr, "--home", home, "--id", id, "--wait", "--json")
	run.Env = env
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("temper run: %v\n%s\ndev log: %s", err, out, clusterReadFile(filepath.Join(home, "dev.log")))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r report.Result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last line is not the JSON result: %v\n%s", err, out)
	}
	if r.Status != "completed" || len(r.Phases) != 2 || r.Phases[1].Kind != "grpo" || r.Phases[1].Metrics["iterations"] != 4 ||
		r.Phases[1].Metrics["version"] != 4 || r.Phases[1].Metrics["reward_mean"] <= 0 {
		t.Fatalf("unexpected result %+v", r)
	}
	t.Logf("%s completed in %.1fs: grpo %v", id, r.ElapsedSeconds, r.Phases[1].Metrics)

	// The reward worker's metrics: its verdicts and reward means, beside the SDK's own series.
	time.Sleep(1500 * time.Millisecond) // the tally scope reports every second
	if resp, err := http.Get("http://" + rewardMetrics + "/metrics"); err != nil {
		t.Errorf("scrape reward worker: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`temper_verdicts_total{activity="reward_Score",sandbox="`, `verdict="pass"} `, `temper_reward_mean{activity="reward_Score",task_queue="reward"} `,
			`temporal_activity_execution_latency_seconds_count{activity_type="reward_Score"`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("reward worker /metrics lacks %q:\n%s", want, body)
			}
		}
	}

	// The samples of the last iteration, read where the rollout workers wrote them (the store named in
	// the run's input, found through the server).
	samples, err := cli(t, "samples", id, "grpo", "--temporal", addr)
	if err != nil || !strings.Contains(samples, "iteration 3 (of 0..3)") || !strings.Contains(samples, "/runs/"+id+"/grpo/rollouts/iter-000003-s0000.jsonl: ") ||
		!strings.Contains(samples, "policy v3") {
		t.Errorf("temper samples: %v\n%s", err, samples)
	}

	c, err := workers.Dial(addr, workers.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	byQueue := map[string]map[string]bool{}
	for _, wf := range []string{id, id + ".sft", id + ".grpo"} {
		clusterIdentities(t, c, wf, byQueue)
	}
	seen := map[string]string{}
	for _, role := range workflows.Roles {
		if role == workflows.QueueTools {
			continue // this pipeline calls no long-running tool (TestToolWorkerKilledMidCall covers that queue)
		}
		want := fmt.Sprintf("%d@", procs[role].cmd.Process.Pid)
		ids := byQueue[role]
		if len(ids) != 1 {
			t.Errorf("queue %s: want tasks handled by exactly one process, got identities %v", role, ids)
			continue
		}
		for ident := range ids {
			if !strings.HasPrefix(ident, want) {
				t.Errorf("queue %s handled by %q, want the %s worker process (pid %d)", role, ident, role, procs[role].cmd.Process.Pid)
			}
			if other, dup := seen[ident]; dup {
				t.Errorf("queues %s and %s were handled by the same process %q", other, role, ident)
			}
			seen[ident] = role
		}
	}
	t.Logf("identities per queue: %v (dev pid %d)", byQueue, dev.Process.Pid)
}

// clusterIdentities adds, per task queue, the identities of the workers that started the workflow's
// workflow tasks and activities.
func clusterIdentities(t *testing.T, c client.Client, wfID string, byQueue map[string]map[string]bool) {
	t.Helper()
	add := func(queue, ident string) {
		if byQueue[queue] == nil {
			byQueue[queue] = map[string]bool{}
		}
		byQueue[queue][ident] = true
	}
	queues := map[int64]string{}
	it := c.GetWorkflowHistory(context.Background(), wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", wfID, err)
		}
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			queues[e.EventId] = e.GetActivityTaskScheduledEventAttributes().TaskQueue.GetName()
		case e.GetActivityTaskStartedEventAttributes() != nil:
			a := e.GetActivityTaskStartedEventAttributes()
			add(queues[a.ScheduledEventId], a.Identity)
		case e.GetWorkflowTaskStartedEventAttributes() != nil:
			add(workflows.QueueTemper, e.GetWorkflowTaskStartedEventAttributes().Identity)
		}
	}
}

func clusterReadFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
