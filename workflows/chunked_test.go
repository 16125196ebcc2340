package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestChunkedKindsNaNBudgetCurve runs every chunked kind (pretrain, sft, dpo, reward) through the one
// driver with the same three settings: chunks of one step, max_seconds far below one chunk, and the
// first step forced non-finite. Each phase must stop after its first chunk, whose only step is
// non-finite (the reward chunk used to return a NaN loss here, which Temporal cannot encode), report
// it as non_finite_steps 1 with finite metrics, leave the weights as they were, and return a curve
// with a point before and one at the stop.
func TestChunkedKindsNaNBudgetCurve(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	shared := `"steps":5,"chunk_steps":1,"max_seconds":0.001,"inject_nan_at":1,"heartbeat_timeout":"10s"`
	task := `{"task":"add2","train_examples":64,"heldout_examples":8}`
	pre := fmt.Sprintf(`{"model":{"preset":"tiny"},"data":%s,"batch":{"rows":4,"seq":32},"eval":{"examples":8,"max_new_tokens":3},%s}`, task, shared)
	sft := fmt.Sprintf(`{"data":%s,"batch":{"rows":4,"seq":32},"eval":{"examples":8,"max_new_tokens":3},%s}`, task, shared)
	dpo := fmt.Sprintf(`{"data":%s,"batch":{"rows":4,"seq":16},"eval":{"examples":8,"max_new_tokens":3,"kl_tokens":0},%s}`, task, shared)
	rm := fmt.Sprintf(`{"data":{"task":"add2","train_pairs":32,"heldout_pairs":8},"batch":{"rows":4,"max_seq":32},"eval":{"pairs":8},%s}`, shared)
	in := workflows.PipelineInput{Name: "nan", Store: "file://" + t.TempDir(), Seed: 4, Phases: []workflows.PhaseSpec{
		{Name: "pre", Kind: "pretrain", Config: json.RawMessage(pre)},
		{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
		{Name: "dpo", Kind: "dpo", Config: json.RawMessage(dpo)},
		{Name: "rm", Kind: "reward", From: "pre", Config: json.RawMessage(rm)},
	}}
	out, id := runPipeline(t, env, in, 5*time.Minute)
	if len(out.Phases) != 4 {
		t.Fatalf("phases %+v", out.Phases)
	}
	root := strings.TrimPrefix(in.Store, "file://")
	for i, r := range out.Phases {
		m := r.Metrics
		t.Logf("%s: %v curve %+v", r.Name, m, r.Curve)
		if m["steps"] != 1 || m["non_finite_steps"] != 1 || m["loss"] != 0 || m["last_loss"] != 0 {
			t.Errorf("%s: steps %v, non_finite_steps %v, loss %v, last_loss %v: want 1 step, non-finite, reported as 0",
				r.Name, m["steps"], m["non_finite_steps"], m["loss"], m["last_loss"])
		}
		for k, v := range m {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%s: metric %s = %v", r.Name, k, v)
			}
		}
		if len(r.Curve) != 2 || r.Curve[0].Step != 0 || r.Curve[1].Step != 1 || r.Curve[1].Seconds <= 0 || m["train_seconds"] != r.Curve[1].Seconds {
			t.Errorf("%s: curve %+v (train_seconds %v): want a point before and one at the stop", r.Name, r.Curve, m["train_seconds"])
		}
		// The skipped step changed no weight: step 1 holds the weights the phase started from.
		start := fmt.Sprintf("file://%s/runs/%s/%s/step-000000/", root, id, r.Name)
		if i == 1 || i == 2 {
			start = out.Phases[i-1].Checkpoint
		}
		if a, b := modelSHA(t, start), modelSHA(t, r.Checkpoint); a != b {
			t.Errorf("%s: weights changed by a non-finite step: %s → %s", r.Name, start, r.Checkpoint)
		}
	}
	replayAll(t, env.Client, id)
}

func modelSHA(t *testing.T, uri string) string {
	t.Helper()
	ck, err := ckpt.New(ckpt.Options{}).Read(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := ck.Manifest.File(trainapi.ModelFile)
	if !ok {
		t.Fatalf("%s has no %s", uri, trainapi.ModelFile)
	}
	return f.SHA256
}

// TestChunkSpecEveryKind: every chunked kind accepts the shared fields and rejects bad values of them
// at the same path.
func TestChunkSpecEveryKind(t *testing.T) {
	const d = `{"task":"add2"}`
	for _, kind := range append([]string{"pretrain", "sft", "reward"}, workflows.PrefKinds...) {
		ok := fmt.Sprintf(`{"data":%s,"steps":10,"chunk_steps":5,"max_seconds":30,"keep_last":2,"heartbeat_timeout":"5s","eval":{"every_chunks":1,"before":false}}`, d)
		if _, err := workflows.DecodePhaseConfig(kind, json.RawMessage(ok), "config"); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		for field, bad := range map[string]string{"max_seconds": "-1", "chunk_steps": "0", "steps": "0", "keep_last": "0", "inject_nan_at": "-1"} {
			_, err := workflows.DecodePhaseConfig(kind, json.RawMessage(fmt.Sprintf(`{"data":%s,%q:%s}`, d, field, bad)), "config")
			if err == nil || !strings.Contains(err.Error(), "config."+field) {
				t.Errorf("%s %s=%s: %v, want an error at config.%s", kind, field, bad, err, field)
			}
		}
	}
}
