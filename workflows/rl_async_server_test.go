package workflows_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// deepPartialGRPO is deep async with partial generations on the tiny add2 task: four iterations
// generating ahead, each generation cut into segments of two tokens that continue under every newer
// policy. After six SFT steps the model rarely stops early, so most rows span several versions.
const deepPartialGRPO = `{"mode":"async","max_staleness":4,"partial":true,"segment_tokens":2,"iterations":6,"max_new_tokens":8,
	"optimizer":{"lr":0.0004,"warmup_steps":2}}`

// TestRLDeepAsyncPartialCompletes runs max_staleness 4 with partial generations on the real
// in-process server and workers: the phase completes (through the continue-as-new runs the test
// server suggests, which carry the queue), its rollouts hold tokens of several policy versions each
// with the version that sampled it, every policy step logs the staleness histogram with lags up to
// 4, and every run replays.
func TestRLDeepAsyncPartialCompletes(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	in := rlPipeline(t, deepPartialGRPO)
	run := start(t, env.Client, in)
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if m := out.Phases[1].Metrics; m["iterations"] != 6 || m["version"] != 6 || m["backtracks"] != 0 {
		t.Fatalf("deep async run: %v", m)
	}
	dir := filepath.Join(strings.TrimPrefix(in.Store, "file://"), "runs", run.GetID(), "grpo")
	// The last segment of iteration 5 (started at iteration 1 under v1, continued under v2, v3, v4).
	last, err := filepath.Glob(filepath.Join(dir, "rollouts", "iter-000005-s0000-g0?.jsonl"))
	if err != nil || len(last) == 0 {
		t.Fatalf("no segments of iteration 5 (%v)", err)
	}
	b, err := os.ReadFile(last[len(last)-1])
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rollout.Read(bytes.NewReader(b), last[len(last)-1])
	if err != nil {
		t.Fatal(err)
	}
	spans := 0
	for _, r := range rs {
		if r.StopReason == rollout.StopPartial || len(r.Versions) != len(r.Tokens) || r.PolicyVersion != 1 {
			t.Fatalf("%s: stop %q, %d versions for %d tokens, policy_version %d", r.ID, r.StopReason, len(r.Versions), len(r.Tokens), r.PolicyVersion)
		}
		if len(r.Versions) > 6 && r.Versions[0] == 1 && r.Versions[6] == 4 {
			spans++
		}
	}
	if spans == 0 {
		t.Fatalf("no row of iteration 5 spans versions 1 to 4: %s", b)
	}
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	steps, maxLag := 0, 0.0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Kind    string             `json:"kind"`
			Metrics map[string]float64 `json:"metrics"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if _, ok := rec.Metrics["reward_mean"]; !ok {
			continue // an evaluation
		}
		steps++
		if _, ok := rec.Metrics["staleness_lag_0"]; !ok {
			t.Errorf("a policy step logged no staleness histogram: %v", rec.Metrics)
		}
		maxLag = max(maxLag, rec.Metrics["staleness_max"])
	}
	if steps != 6 || maxLag != 4 {
		t.Fatalf("%d policy steps logged, the largest lag %g; want 6 and 4", steps, maxLag)
	}
	replayAll(t, env.Client, run.GetID())
}
