package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers/testenv"
)

// TestWorkerMetricsMidRun runs `temper worker --metrics` against the test server, starts a pipeline (a
// tiny SFT, then a long demo phase) and scrapes /metrics while the run is still going: the Temporal SDK's
// series and Temper's (activity durations, the SFT chunk's loss and tokens/s) must both be there.
func TestWorkerMetricsMidRun(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("trains a tiny model; runs in CI and without -short")
	}
	env := testenv.Get(t)
	addr := env.Server.FrontendAddr()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runCLI(ctx, []string{"worker", "--temporal", addr, "--metrics", metricsAddr, "--roles", "all"}, io.Discard, io.Discard)
	}()
	t.Cleanup(func() { cancel(); <-done })

	p, err := pipeline.Parse("m.yaml", []byte(`name: metrics
phases:
  - name: sft
    kind: sft
    config:
      model: {preset: tiny}
      data: {task: add2, train_examples: 300, heldout_examples: 16}
      batch: {rows: 8, seq: 32}
      steps: 6
      chunk_steps: 3
      eval: {examples: 16, max_new_tokens: 4, before: false}
  - {name: long, kind: demo, config: {steps: 600, step_duration: 100ms}}
`), nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const id = "metrics-1"
	if _, err := pipeline.Start(ctx, env.Client, id, p); err != nil {
		t.Fatal(err)
	}
	defer env.Client.CancelWorkflow(context.Background(), id, "")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		s, err := report.Observe(ctx, env.Client, id)
		if err == nil && s.Progress.Phase == "long" && s.Step.Step > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not reach its long phase: %+v %v", s, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // the tally scope reports every second
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`(?m)^temporal_request_total\{`,                          // SDK: client requests
		`(?m)^temporal_activity_execution_latency_seconds_\w+\{`, // SDK: activity latency
		`(?m)^temporal_workflow_task_execution_latency_seconds_\w+\{`,
		`(?m)^temper_activity_duration_seconds_bucket\{activity="train_Chunk",.*outcome="ok"`,
		`(?m)^temper_train_loss\{activity="train_Chunk",task_queue="trainer"\} \d`,
		`(?m)^temper_train_tokens_per_second\{activity="train_Chunk",task_queue="trainer"\} [1-9]`,
		`(?m)^temper_eval_heldout_exact_match\{activity="train_Evaluate"`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			var lines []string
			for _, l := range strings.Split(text, "\n") {
				if strings.HasPrefix(l, "temper_") || strings.HasPrefix(l, "temporal_") {
					lines = append(lines, l)
				}
			}
			t.Errorf("/metrics has no series matching %s; it has:\n%s", want, strings.Join(lines, "\n"))
		}
	}
}
