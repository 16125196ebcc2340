package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// clusterGRPOConfig is a sync GRPO phase whose iterations have four rollout shards of 64 samples
// (16 prompts × 16, four prompts per generation batch), scored by a format check the barely trained
// model meets only sometimes, so the weights move.
const clusterGRPOConfig = `{"data":{"task":"add2","heldout_examples":16},"mode":"sync","iterations":4,"prompts":16,"group":16,
	"max_new_tokens":8,"rollout":{"shards":4},"reward":{"verifiers":[{"name":"format","params":{"regex":["[0-9]","^[0-9]"]}}]},
	"eval_every":0,"eval":{"examples":16,"max_new_tokens":4,"before":false},"heartbeat_timeout":"4s"}`

// TestClusterPostgresRolloutKill is the scale-out cluster (make test-cluster; set TEMPER_TEST_POSTGRES
// to a URL, as scripts/postgres.sh prints): `temper server --db` runs Temporal on PostgreSQL, and
// separate processes run one workflow worker, one trainer, one reward and two rollout workers. A
// sync GRPO phase with four shards per iteration runs once with one rollout worker, then with two,
// one of which is killed with SIGKILL while it generates a shard (a worker caught between two shards is
// restarted and another kill aimed): the run completes (the shard is retried alone, on the other
// worker), both rollout workers took shards, and the final weights and optimizer state are
// byte-identical to the one-worker run's.
func TestClusterPostgresRolloutKill(t *testing.T) {
	base := os.Getenv("TEMPER_TEST_POSTGRES")
	if base == "" || testing.Short() {
		t.Skip("set TEMPER_TEST_POSTGRES=postgres://... (scripts/postgres.sh prints one) and run without -short: make test-cluster")
	}
	home := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	db := pgWithDatabase(t, base, fmt.Sprintf("temper_cluster_%d", time.Now().UnixNano()))
	srv := exec.Command(os.Args[0], "server", "--db", db, "--home", home, "--port", fmt.Sprint(port))
	srv.Env = append(os.Environ(), "TEMPER_TEST_MAIN=1", "TEMPER_HOME="+home)
	srvLog, err := os.Create(filepath.Join(home, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer srvLog.Close()
	srv.Stdout, srv.Stderr = srvLog, srvLog
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() })
	for deadline := time.Now().Add(2 * time.Minute); !workers.Reachable(addr); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("temper server did not listen on %s:\n%s", addr, clusterReadFile(filepath.Join(home, "server.log")))
		}
	}
	procs := map[string]*workerProcess{}
	for _, role := range []string{workflows.QueueTemper, workflows.QueueTrainer, workflows.QueueReward, "rollout1"} {
		r := strings.TrimSuffix(role, "1")
		p := &workerProcess{t: t, role: r, addr: addr, logs: filepath.Join(home, role+".log")}
		p.start()
		t.Cleanup(p.kill)
		procs[role] = p
	}
	c, err := workers.Dial(addr, workers.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	dir := t.TempDir()
	store := "file://" + dir
	ids := fmt.Sprintf("pg-%d", time.Now().UnixNano())
	pipeline := func(from string) workflows.PipelineInput {
		return workflows.PipelineInput{Name: "pg-grpo", Store: store, Seed: 3, Phases: []workflows.PhaseSpec{
			{Name: "grpo", Kind: "grpo", From: from, Config: json.RawMessage(clusterGRPOConfig)}}}
	}
	start := time.Now()
	from := waitRun(t, mustStart(t, c, ids+"-base", rlSFTPipeline(store))).Phases[0].Checkpoint
	one := waitRun(t, mustStart(t, c, ids+"-one", pipeline(from)))
	t.Logf("SFT and the one-rollout-worker run in %.1fs", time.Since(start).Seconds())

	second := &workerProcess{t: t, role: workflows.QueueRollout, addr: addr, logs: filepath.Join(home, "rollout2.log")}
	second.start()
	t.Cleanup(second.kill)
	rolls := []*workerProcess{procs["rollout1"], second}
	start = time.Now()
	wfID := ids + "-two.grpo"
	r := mustStart(t, c, ids+"-two", pipeline(from))
	// Once both workers have completed a shard, SIGKILL one that runs a first attempt of a shard (of
	// iteration 1 or later), and leave it dead. A warm shard can finish between the describe that saw
	// it and the kill: then that worker is restarted and a later shard is the target.
	var victim *workerProcess
	completed := func() map[string]int {
		took := map[string]int{}
		for _, ident := range generateIdentities(t, c, wfID) {
			took[strings.SplitN(ident, "@", 2)[0]]++
		}
		return took
	}
poll:
	for deadline := time.Now().Add(3 * time.Minute); victim == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no shard of iterations 1-3 was seen running on a rollout worker after both had completed one")
		}
		desc, err := c.DescribeWorkflowExecution(context.Background(), wfID, "")
		if err != nil {
			continue
		}
		done := 0
		if p, ok := desc.WorkflowExecutionInfo.GetMemo().GetFields()["iteration"]; ok {
			_ = json.Unmarshal(p.Data, &done)
		}
		if done >= 3 {
			t.Fatalf("iteration 3 finished before a kill landed (shards completed per pid: %v)", completed())
		}
		if done < 1 {
			continue
		}
		if took := completed(); took[fmt.Sprint(rolls[0].cmd.Process.Pid)] == 0 || took[fmt.Sprint(rolls[1].cmd.Process.Pid)] == 0 {
			continue
		}
		for _, pa := range desc.PendingActivities {
			if victim != nil || pa.ActivityType.GetName() != rolloutapi.GenerateName || pa.State != enumspb.PENDING_ACTIVITY_STATE_STARTED || pa.Attempt != 1 {
				continue
			}
			for _, p := range rolls {
				if victim == nil && strings.HasPrefix(pa.LastWorkerIdentity, fmt.Sprintf("%d@", p.cmd.Process.Pid)) {
					p.kill()
					// The worker may have finished that shard and started another before the kill: any
					// first attempt still started by the dead process is the one the kill interrupted.
					shard := killedShard(t, c, wfID, p.cmd.Process.Pid)
					if shard == "" {
						t.Logf("pid %d was between shards when killed: restarting it", p.cmd.Process.Pid)
						p.start()
						continue poll // the describe is stale now
					}
					if !rlAwaitRetry(t, c, wfID, shard) {
						t.Fatalf("shard %s, interrupted by the kill, completed without a retry", shard)
					}
					victim = p
					t.Logf("SIGKILL of rollout worker pid %d during shard %s after %d iterations (%.1fs into the run): retried",
						p.cmd.Process.Pid, shard, done, time.Since(start).Seconds())
				}
			}
		}
	}
	two := waitRun(t, r)
	t.Logf("two-rollout-worker run with a kill in %.1fs", time.Since(start).Seconds())

	if retried := rlRetried(t, c, wfID); retried[rolloutapi.GenerateName] != 1 {
		t.Errorf("want exactly the killed shard retried, got retries %v", retried)
	}
	took := completed()
	for _, p := range rolls {
		if took[fmt.Sprint(p.cmd.Process.Pid)] == 0 {
			t.Errorf("rollout worker pid %d took no shard (shards per pid: %v)", p.cmd.Process.Pid, took)
		}
	}
	t.Logf("shards per rollout worker pid: %v", took)
	if m := two.Phases[0].Metrics; m["iterations"] != 4 || m["version"] != 4 {
		t.Errorf("two-worker run metrics %v", m)
	}
	if log := clusterReadFile(filepath.Join(home, "server.log")); !strings.Contains(log, "(state in PostgreSQL postgres://") {
		t.Errorf("temper server does not say it keeps its state in PostgreSQL:\n%s", log)
	}
	a, b := one.Phases[0].Checkpoint, two.Phases[0].Checkpoint
	if fileHash(t, from, trainapi.ModelFile) == fileHash(t, a, trainapi.ModelFile) {
		t.Fatalf("GRPO did not change the weights (reward_mean %v): the comparison would prove nothing", one.Phases[0].Metrics["reward_mean"])
	}
	sameState(t, a, b, "between one worker and two workers with a kill")
}

// killedShard returns the ID of the rollout.Generate whose first attempt process pid had started and
// not finished, or "".
func killedShard(t *testing.T, c client.Client, wfID string, pid int) string {
	t.Helper()
	desc, err := c.DescribeWorkflowExecution(context.Background(), wfID, "")
	if err != nil {
		t.Fatalf("describe %s: %v", wfID, err)
	}
	for _, pa := range desc.PendingActivities {
		if pa.ActivityType.GetName() == rolloutapi.GenerateName && pa.State == enumspb.PENDING_ACTIVITY_STATE_STARTED && pa.Attempt == 1 &&
			strings.HasPrefix(pa.LastWorkerIdentity, fmt.Sprintf("%d@", pid)) {
			return pa.ActivityId
		}
	}
	return ""
}

// generateIdentities returns the identity of the worker that completed each rollout.Generate of a
// workflow (one per shard).
func generateIdentities(t *testing.T, c client.Client, wfID string) []string {
	t.Helper()
	types := map[int64]string{}
	var out []string
	it := c.GetWorkflowHistory(context.Background(), wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[e.EventId] = a.ActivityType.GetName()
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && types[a.ScheduledEventId] == rolloutapi.GenerateName {
			out = append(out, a.Identity)
		}
	}
	return out
}

// pgWithDatabase replaces the database of a postgres URL.
func pgWithDatabase(t *testing.T, dsn, db string) string {
	t.Helper()
	i := strings.Index(dsn, "://")
	if i < 0 {
		t.Fatalf("TEMPER_TEST_POSTGRES=%q: want postgres://user:password@host:port/db", dsn)
	}
	rest := dsn[i+3:]
	host, query := rest, ""
	if k := strings.IndexByte(rest, '?'); k >= 0 {
		host, query = rest[:k], rest[k:]
	}
	if k := strings.IndexByte(host, '/'); k >= 0 {
		host = host[:k]
	}
	return dsn[:i+3] + host + "/" + db + query
}
