package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

func TestRunWaitJSONAndStatus(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	addr := env.Server.FrontendAddr()
	p := writeFile(t, "p.yaml", "name: cli\nphases:\n- {name: a, kind: demo, config: {steps: 2, step_duration: 10ms}}\n- {name: b, kind: demo, config: {steps: 3, step_duration: 10ms}}\n")
	out, err := cli(t, "run", p, "--temporal", addr, "--wait", "--json", "--id", "cli-run-1")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var r report.Result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last line is not the JSON result: %v\n%s", err, out)
	}
	if r.RunID != "cli-run-1" || r.Status != "completed" || len(r.Phases) != 2 || r.Phases[1].Metrics["steps"] != 3 ||
		!strings.HasSuffix(r.Phases[1].Checkpoint, "/runs/cli-run-1/b/step-000003/") {
		t.Fatalf("unexpected result %+v", r)
	}
	out, err = cli(t, "status", "cli-run-1", "--temporal", addr)
	if err != nil || !strings.Contains(out, "cli-run-1 completed") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = cli(t, "ls", "--temporal", addr)
	if err != nil || !strings.Contains(out, "cli-run-1") {
		t.Fatalf("ls: %v\n%s", err, out)
	}
}

// TestReadmeTemporalCLIInputRuns starts a Pipeline with the README's --input JSON exactly as the
// Temporal CLI sends it (the raw JSON as a json/plain payload) and checks it completes.
func TestReadmeTemporalCLIInputRuns(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	raw := json.RawMessage(mustJSON(t, readmeTemporalInput(t)))
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: "readme-example", TaskQueue: workflows.QueueTemper,
	}, workflows.PipelineName, raw)
	if err != nil {
		t.Fatal(err)
	}
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("README example run: %v", err)
	}
	if len(out.Phases) != 1 || out.Phases[0].Kind != "sft" || out.Phases[0].Metrics["steps"] != 10 ||
		!strings.Contains(out.Phases[0].Checkpoint, "/runs/readme-example/sft/step-000010/") {
		t.Fatalf("README example ran %+v", out.Phases)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDevSurvivesKill9 runs `temper dev` as a real process with a SQLite file, kills it with SIGKILL in
// the middle of a run, starts it again on the same state, and checks that the run completes.
func TestDevSurvivesKill9(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("subprocess test; runs in CI and without -short")
	}
	home := t.TempDir()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startDev := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "dev", "--home", home, "--port", fmt.Sprint(port), "--ui-port", "-1")
		cmd.Env = append(os.Environ(), "TEMPER_TEST_MAIN=1")
		logf, _ := os.Create(filepath.Join(home, fmt.Sprintf("dev-%d.log", time.Now().UnixNano())))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		deadline := time.Now().Add(60 * time.Second)
		for !workers.Reachable(addr) {
			if time.Now().After(deadline) {
				t.Fatalf("temper dev did not listen on %s", addr)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return cmd
	}
	dev := startDev()
	p := writeFile(t, "p.yaml", "name: crash\nphases:\n- {name: a, kind: demo, config: {steps: 3, step_duration: 10ms}}\n- {name: long, kind: demo, config: {steps: 30, step_duration: 100ms, heartbeat_timeout: 2s}}\n")
	if out, err := cli(t, "run", p, "--temporal", addr, "--id", "crash-1"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	c, err := workers.Dial(addr, "default")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := report.Observe(context.Background(), c, "crash-1")
		if err == nil && s.Progress.Phase == "long" && s.Step.Step >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not reach step 5 of phase long: %+v %v", s, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Close()
	if err := dev.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	startDev()
	out, err := cli(t, "status", "crash-1", "--temporal", addr, "--wait", "--json")
	if err != nil {
		t.Fatalf("after restart: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var r report.Result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Status != "completed" || len(r.Phases) != 2 || r.Phases[1].Metrics["attempts"] < 2 || r.Phases[1].Metrics["resumed_from"] < 1 {
		t.Fatalf("want the long phase retried from its heartbeat after the kill, got %+v", r)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
