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

	"google.golang.org/protobuf/proto"

	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestRLShardsIdentical runs iteration 0 of a GRPO phase as one shard and, from the same SFT
// checkpoint, as four shards (async, two iterations): the four rollouts objects, concatenated, are
// byte-identical to the one (sampling is seeded per prompt, batches are aligned windows of the
// iteration's prompts), the verdicts went to the store beside them, and the runs replay.
func TestRLShardsIdentical(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	// 84 prompts × 3: generation batches of 21 prompts (63 samples), which flat 64-sample batches would cut
	// differently; four shards of 21 prompts. (On the pure-Go backend a row's samples did not depend on
	// its batch when batches were cut flat, checked by mutation; seeding by the shard's own prompt index
	// fails this test.)
	in := rlPipeline(t, `{"iterations":1,"prompts":84,"group":3,"rollout":{"shards":1}}`)
	g4 := map[string]any{}
	if err := json.Unmarshal(in.Phases[1].Config, &g4); err != nil {
		t.Fatal(err)
	}
	g4["iterations"], g4["mode"], g4["rollout"] = 2, "async", map[string]any{"shards": 4}
	b, _ := json.Marshal(g4)
	in.Phases = append(in.Phases, workflows.PhaseSpec{Name: "grpo4", Kind: "grpo", From: "sft", Config: b})
	out, id := runPipeline(t, env, in, 10*time.Minute)
	if m := out.Phases[2].Metrics; m["iterations"] != 2 || m["version"] != 2 {
		t.Fatalf("4-shard async phase: %v", m)
	}
	root := strings.TrimPrefix(in.Store, "file://")
	read := func(pattern string) ([]byte, int) {
		files, err := filepath.Glob(filepath.Join(root, "runs", "*", pattern))
		if err != nil {
			t.Fatal(err)
		}
		var all []byte
		for _, f := range files { // Glob sorts: s0000, s0001, ...
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all, len(files)
	}
	one, n1 := read("grpo/rollouts/iter-000000-s*[0-9].jsonl")
	four, n4 := read("grpo4/rollouts/iter-000000-s*[0-9].jsonl")
	if n1 != 1 || n4 != 4 || len(one) == 0 {
		t.Fatalf("%d and %d shard objects (want 1 and 4)", n1, n4)
	}
	if !bytes.Equal(one, four) {
		t.Fatalf("1 shard (%d bytes) and 4 shards (%d bytes) differ", len(one), len(four))
	}
	if _, n := read("grpo4/rollouts/iter-000001-s*.verdicts.jsonl"); n != 4 {
		t.Fatalf("iteration 1: %d verdicts objects, want 4", n)
	}
	replayAll(t, env.Client, id)
}

// historyBytes is the size of every run of workflow id (continue-as-new included).
func historyBytes(t *testing.T, env *testenv.Env, id string) int {
	t.Helper()
	resp, err := env.Client.ListWorkflow(context.Background(), workflowListRequest{query: fmt.Sprintf("WorkflowId = '%s'", id)}.build())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ex := range resp.Executions {
		n += proto.Size(history(t, env.Client, ex.Execution.WorkflowId, ex.Execution.RunId))
	}
	return n
}

// TestRLHistoryBytes (long: make test-long) measures the RL phase's history per iteration at 128
// (16 prompts × 8) and 8,192 (512 prompts × 16) samples per iteration, 3 iterations each on tiny:
// per-sample data goes by reference, so the second must stay within 2× the first.
func TestRLHistoryBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("long: runs 3 iterations of 8,192 samples")
	}
	env := testenv.Get(t)
	env.Roles(t)
	per := map[int]float64{}
	for _, c := range []struct{ prompts, group int }{{16, 8}, {512, 16}} {
		extra := fmt.Sprintf(`{"iterations":3,"prompts":%d,"group":%d,"max_new_tokens":2,"minibatch":1024,"rollout":{"shards":1}}`, c.prompts, c.group)
		start := time.Now()
		out, id := runPipeline(t, env, rlPipeline(t, extra), 60*time.Minute)
		if m := out.Phases[1].Metrics; m["iterations"] != 3 {
			t.Fatalf("%d×%d: %v", c.prompts, c.group, m)
		}
		samples := c.prompts * c.group
		per[samples] = float64(historyBytes(t, env, id+".grpo")) / 3
		t.Logf("%d samples per iteration: %.0f history bytes per iteration (phase history / 3), %.0fs", samples, per[samples], time.Since(start).Seconds())
	}
	if per[8192] > 2*per[128] {
		t.Fatalf("history per iteration: %.0f bytes at 8,192 samples, %.0f at 128: want at most 2×", per[8192], per[128])
	}
}
