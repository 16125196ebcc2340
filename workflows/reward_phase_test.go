package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestRewardPhase runs a tiny pretrain → reward pipeline on the real server: the reward phase adds a
// value head to the pretrained model, trains a few Bradley–Terry chunks with the LM regularizer
// (continuing as new under the package's low history budget), evaluates held-out pairwise accuracy
// before and after, and replays.
func TestRewardPhase(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	rmTrainer(t, env)
	pre := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":200,"heldout_examples":8},
		"batch":{"rows":8,"seq":32},"steps":2,"chunk_steps":2,"eval":{"before":false,"examples":8,"max_new_tokens":3}}`
	rm := `{"data":{"task":"add2","train_pairs":100,"heldout_pairs":40},"batch":{"rows":8,"max_seq":32},"loss":{"lm_coef":0.5},
		"steps":6,"chunk_steps":2,"eval":{"pairs":40},"keep_last":1,"heartbeat_timeout":"10s"}`
	run := start(t, env.Client, workflows.PipelineInput{Name: "rm", Store: "file://" + t.TempDir(), Seed: 2, Phases: []workflows.PhaseSpec{
		{Name: "pre", Kind: "pretrain", Config: json.RawMessage(pre)},
		{Name: "rm", Kind: "reward", Config: json.RawMessage(rm)},
	}})
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	r := out.Phases[1]
	m := r.Metrics
	t.Logf("reward phase: %v", m)
	if r.Kind != "reward" || !strings.HasSuffix(r.Checkpoint, "/rm/step-000006/") {
		t.Fatalf("reward phase result %+v", r)
	}
	if m["steps"] != 6 || m["new_head"] != 1 || m["heldout_pairs"] != 40 || m["heldout_pairs_before"] != 40 || m["non_finite_steps"] != 0 {
		t.Fatalf("metrics %v", m)
	}
	if !(m["train_lm_loss"] > 0 && m["heldout_lm_loss"] > 0) {
		t.Errorf("lm_coef 0.5 should report the chosen completions' cross-entropy: %v", m)
	}
	for _, k := range []string{"heldout_pair_accuracy", "heldout_pair_accuracy_before", "heldout_bt_loss", "loss", "train_pair_accuracy"} {
		if v, ok := m[k]; !ok || v < 0 || (strings.Contains(k, "accuracy") && v > 1) {
			t.Errorf("metric %s = %v (present %v)", k, v, ok)
		}
	}
	// keep_last 1: the last and the best survive, older chunks are pruned.
	refs, err := ckpt.New(ckpt.Options{}).List(context.Background(), strings.Split(r.Checkpoint, "/runs/")[0], run.GetID(), "rm")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) > 2 || refs[len(refs)-1].Step != 6 {
		t.Errorf("retained %+v, want at most the best and step 6", refs)
	}
	replayAll(t, env.Client, run.GetID())
}

func TestRewardPhaseConfig(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`{"data":{"task":"add2"}}`, ""},
		{`{"data":{"train":"file:///tmp/pairs.jsonl"},"loss":{"margin":0.5,"center_coef":0}}`, ""},
		{`{}`, "config.data"},
		{`{"data":{"task":"add3"}}`, `did you mean "add"`},
		{`{"data":{"task":"add2"},"loss":{"margin":-1}}`, "config.loss.margin"},
		{`{"data":{"task":"add2"},"loss":{"center":0.1}}`, `did you mean "center_coef"`},
		{`{"data":{"task":"add2"},"batch":{"rows":0}}`, "config.batch.rows"},
		{`{"data":{"task":"add2"},"batch":{"seq":32}}`, "config.batch.seq: unknown field (valid: rows, max_seq)"},
		{`{"data":{"task":"add2","train":"file:///x.jsonl"}}`, "not both"},
		{`{"data":{"task":"add2"},"steps":0}`, "config.steps"},
	} {
		_, err := workflows.DecodePhaseConfig("reward", json.RawMessage(c.raw), "config")
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want one containing %q", c.raw, err, c.want)
		}
	}
	if s, err := workflows.ExplainPhase("reward"); err != nil || !strings.Contains(s, "center_coef") || !strings.Contains(s, "Bradley–Terry") {
		t.Errorf("explain: %v\n%s", err, s)
	}
}
