package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/distill"
	"github.com/temperml/temper/activities/train/lm"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestDistillPhase runs a tiny sft → distill → distill pipeline on the real server: a small teacher
// trains on add2; a fresh tiny student learns it from precomputed top-k targets (teacher: PHASE); a
// GKD phase continues that student (student from) with half of each batch its own samples and the
// teacher on the fly. Both distill phases evaluate held-out exact match before and after, and the
// histories replay.
func TestDistillPhase(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	trainerWorker(t, env, train.Register, lm.Register, distill.Register)
	data := `{"task":"add2","train_examples":64,"heldout_examples":8}`
	teacher := `{"model":{"preset":"small"},"data":` + data + `,"batch":{"rows":8,"seq":32},"steps":2,"chunk_steps":2,"eval":{"before":false,"examples":8,"max_new_tokens":4}}`
	kd := `{"teacher":"teacher","targets":"precomputed","data":` + data + `,"batch":{"rows":8,"seq":24},"loss":{"top_k":8,"temperature":2},
		"steps":4,"chunk_steps":2,"eval":{"examples":8,"max_new_tokens":4},"heartbeat_timeout":"10s"}`
	gkd := `{"teacher":"teacher","student":"from","data":` + data + `,"batch":{"rows":8,"seq":24},
		"loss":{"divergence":"jsd","beta":0.5,"lambda":0.5,"sample_tokens":5},"steps":2,"chunk_steps":2,"eval":{"examples":8,"max_new_tokens":4}}`
	run := start(t, env.Client, workflows.PipelineInput{Name: "kd", Store: "file://" + t.TempDir(), Seed: 2, Phases: []workflows.PhaseSpec{
		{Name: "teacher", Kind: "sft", Config: json.RawMessage(teacher)},
		{Name: "kd", Kind: "distill", Config: json.RawMessage(kd)},
		{Name: "gkd", Kind: "distill", From: "kd", Config: json.RawMessage(gkd)},
	}})
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	kdr, gkdr := out.Phases[1], out.Phases[2]
	t.Logf("kd: %v\ngkd: %v", kdr.Metrics, gkdr.Metrics)
	if kdr.Kind != "distill" || !strings.HasSuffix(kdr.Checkpoint, "/kd/step-000004/") || !strings.HasSuffix(gkdr.Checkpoint, "/gkd/step-000002/") {
		t.Fatalf("results %+v %+v", kdr, gkdr)
	}
	m := kdr.Metrics
	if m["steps"] != 4 || m["teacher_target_examples"] != 64 || !(m["train_forward_kl_topk"] > 0) || m["train_on_policy_rows"] != 0 || m["non_finite_steps"] != 0 {
		t.Errorf("kd metrics %v", m)
	}
	g := gkdr.Metrics
	if g["steps"] != 2 || g["train_on_policy_rows"] != 4 || !(g["train_jsd"] > 0) || g["teacher_target_examples"] != 0 {
		t.Errorf("gkd metrics %v", g)
	}
	for _, r := range []workflows.PhaseResult{kdr, gkdr} {
		for _, k := range []string{"heldout_exact_match", "heldout_exact_match_before", "heldout_loss", "heldout_loss_before"} {
			if _, ok := r.Metrics[k]; !ok {
				t.Errorf("%s: no %s", r.Name, k)
			}
		}
	}
	// The kd student started fresh: its held-out loss before training is a fresh model's (≈ log 264),
	// the gkd phase's is kd's after.
	if !(m["heldout_loss_before"] > 5) || g["heldout_loss_before"] != m["heldout_loss"] {
		t.Errorf("kd loss before %g (want a fresh model's), gkd loss before %g (want kd's after, %g)", m["heldout_loss_before"], g["heldout_loss_before"], m["heldout_loss"])
	}
	replayAll(t, env.Client, run.GetID())
}

func TestDistillPhaseConfig(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`{"teacher":"file:///t/","data":{"task":"add2"}}`, ""},
		{`{"teacher":"file:///t/","data":{"task":"add2"},"loss":{"divergence":"jsd","beta":0.9,"lambda":1}}`, ""},
		{`{"teacher":"file:///t/","targets":"precomputed","data":{"task":"add2"},"loss":{"top_k":8}}`, ""},
		{`{"data":{"task":"add2"}}`, "config.teacher: required"},
		{`{"teacher":"t","data":{"task":"add2"},"targets":"cached"}`, `config.targets: "cached": allowed values: on_the_fly, precomputed`},
		{`{"teacher":"t","data":{"task":"add2"},"student":"teacher"}`, `config.student: "teacher": allowed values: scratch, from`},
		{`{"teacher":"t","data":{"task":"add2"},"loss":{"divergence":"kl"}}`, `config.loss.divergence: "kl": allowed values: forward, reverse, jsd`},
		{`{"teacher":"t","data":{"task":"add2"},"loss":{"divergence":"jsd","beta":1.5}}`, "config.loss.beta"},
		{`{"teacher":"t","data":{"task":"add2"},"loss":{"lambda":-0.1}}`, "config.loss.lambda"},
		{`{"teacher":"t","data":{"task":"add2"},"loss":{"temperature":0}}`, "config.loss.temperature"},
		{`{"teacher":"t","data":{"task":"add2"},"loss":{"divergence":"reverse","top_k":8}}`, "config.loss.top_k"},
		{`{"teacher":"t","data":{"task":"add2"},"targets":"precomputed"}`, "config.loss.top_k: targets precomputed"},
		{`{"teacher":"t","data":{"task":"add2"},"targets":"precomputed","loss":{"top_k":8,"lambda":0.5}}`, "config.loss.lambda"},
		{`{"teacher":"t","data":{"task":"add2"},"loss":{"lamda":0.5}}`, `did you mean "lambda"`},
		{`{"teacher":"t","data":{"task":"add2","text":true}}`, "config.data.text"},
		{`{"teacher":"t","data":{"task":"add2"},"steps":0}`, "config.steps"},
	} {
		_, err := workflows.DecodePhaseConfig("distill", json.RawMessage(c.raw), "config")
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want one containing %q", c.raw, err, c.want)
		}
	}
	if s, err := workflows.ExplainPhase("distill"); err != nil || !strings.Contains(s, "lambda") || !strings.Contains(s, "precomputed") || !strings.Contains(s, "GKD") {
		t.Errorf("explain: %v\n%s", err, s)
	}
	// teacher names a URI or an earlier phase; student from needs a checkpoint.
	sft := workflows.PhaseSpec{Name: "t", Kind: "sft", Config: json.RawMessage(`{"data":{"task":"add2"}}`)}
	for _, c := range []struct {
		phases []workflows.PhaseSpec
		want   string
	}{
		{[]workflows.PhaseSpec{sft, {Name: "d", Kind: "distill", Config: json.RawMessage(`{"teacher":"t","data":{"task":"add2"}}`)}}, ""},
		{[]workflows.PhaseSpec{sft, {Name: "d", Kind: "distill", Config: json.RawMessage(`{"teacher":"x","data":{"task":"add2"}}`)}}, `phases[1].config.teacher: "x" is neither`},
		{[]workflows.PhaseSpec{{Name: "d", Kind: "distill", Config: json.RawMessage(`{"teacher":"d","data":{"task":"add2"}}`)}}, `phases[0].config.teacher: "d" is neither`},
		{[]workflows.PhaseSpec{{Name: "d", Kind: "distill", Config: json.RawMessage(`{"teacher":"gs://b/t/","student":"from","data":{"task":"add2"}}`)}}, "phases[0].from"},
	} {
		in := workflows.PipelineInput{Phases: c.phases}
		err := in.Validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want one containing %q", c.phases[len(c.phases)-1].Config, err, c.want)
		}
	}
}
