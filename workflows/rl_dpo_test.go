package workflows_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestOnlineDPO runs a tiny sft → online_dpo pipeline on the real in-process server with the real
// roles: every iteration's rollouts are paired (or tied) and trained with the dpo loss against the
// SFT checkpoint, each step's pair and implicit-reward metrics reach the metrics log, the phase's
// result sums them, the held-out evaluation runs as GRPO's does, and the histories replay.
func TestOnlineDPO(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	in := rlPipeline(t, "")
	// A model after 6 SFT steps solves nothing: hot sampling and a reward for starting with a digit
	// make groups whose samples differ, so pairs form.
	in.Phases[1] = workflows.PhaseSpec{Name: "odpo", Kind: workflows.KindOnlineDPO, Config: mergeConfigs(t, string(in.Phases[1].Config),
		`{"iterations":3,"prompts":6,"group":3,"temperature":2,"preference":{"beta":0.2},"eval":{"before":true},
			"reward":{"verifiers":[{"name":"format","params":{"regex":["^[0-9]"]}}]}}`)}
	run := start(t, env.Client, in)
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	m := out.Phases[1].Metrics
	t.Logf("online_dpo: %v", m)
	if m["iterations"] != 3 || m["version"] != 3 || m["backtracks"] != 0 {
		t.Fatalf("want 3 iterations to version 3, no back-track: %v", m)
	}
	if m["pairs_formed"] < 1 || m["pairs_formed"]+m["ties_skipped"] != 3*6 {
		t.Errorf("pairs %v + ties %v: want at least one pair, and one pair or tie per prompt (18)", m["pairs_formed"], m["ties_skipped"])
	}
	for _, k := range []string{"heldout_exact_match", "heldout_exact_match_before", "implicit_reward_accuracy", "implicit_reward_margin", "pair_score_gap"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result has no %s", k)
		}
	}
	if m["pair_score_gap"] <= 0 {
		t.Errorf("pair_score_gap %v: a chosen sample scores above its rejected one", m["pair_score_gap"])
	}
	recs, err := ckpt.New(ckpt.Options{}).ReadMetrics(context.Background(), in.Store, out.RunID, "odpo")
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, r := range recs {
		if r.Kind != ckpt.RecordTrain {
			continue
		}
		steps++
		if _, ok := r.Metrics["pairs_formed"]; !ok {
			b, _ := json.Marshal(r.Metrics)
			t.Errorf("step record without pairs_formed: %s", b)
		}
		if r.Metrics["pairs_formed"] > 0 {
			if _, ok := r.Metrics["rewards/margin"]; !ok {
				t.Errorf("step %d trained pairs but logged no rewards/margin", r.Step)
			}
		}
	}
	if steps != 3 {
		t.Errorf("%d step records in the metrics log, want 3", steps)
	}
	replayAll(t, env.Client, run.GetID())
}
