package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/rewardmodel"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// finalState opens the checkpoint at uri and reads its state.json.
func finalState(t *testing.T, uri string) (*ckpt.Checkpoint, ckpt.State) {
	t.Helper()
	ctx := context.Background()
	ck, err := ckpt.New(ckpt.Options{}).Read(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ck.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ck, st
}

// ppoPipeline is a tiny sft → ppo pipeline; extra is merged into the ppo config.
func ppoPipeline(t *testing.T, extra string) workflows.PipelineInput {
	t.Helper()
	in := rlPipeline(t, extra)
	in.Name = "ppo"
	in.Phases[1].Name, in.Phases[1].Kind = "ppo", "ppo"
	return in
}

// TestPPOPhase runs sft → ppo on the real server: the ppo phase (workflow RL-ppo, the RL loop) starts
// from the SFT checkpoint, which has no value head, adds one, and trains 4 iterations; each step
// reports a finite value loss and the other PPO metrics; the final checkpoint keeps the causal LM in
// model.safetensors and the critic in critic.safetensors; the histories replay. Async mode (stale
// rollouts, TIS) completes too. With a NaN injected at iteration 2 the loop back-tracks to the SFT
// checkpoint (a fresh head again) and finishes.
func TestPPOPhase(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	for _, c := range []struct {
		name               string
		extra              string
		version, backtrack float64
		dir                string
	}{
		{"plain", `{"eval":{"examples":16,"max_new_tokens":4,"before":true}}`, 4, 0, "/ppo/step-000004/"},
		{"async", `{"mode":"async"}`, 4, 0, "/ppo/step-000004/"},
		{"nan backtrack", `{"inject_nan_at":2}`, 2, 1, "/ppo.b1/step-000002/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := start(t, env.Client, ppoPipeline(t, c.extra))
			var out workflows.PipelineOutput
			if err := run.Get(context.Background(), &out); err != nil {
				t.Fatalf("pipeline: %v", err)
			}
			ph := out.Phases[1]
			m := ph.Metrics
			t.Logf("ppo phase: %v", m)
			if m["iterations"] != 4 || m["version"] != c.version || m["backtracks"] != c.backtrack || !strings.Contains(ph.Checkpoint, c.dir) {
				t.Fatalf("ppo phase ended at %s with %v; want version %v, %v back-tracks, in %s", ph.Checkpoint, m, c.version, c.backtrack, c.dir)
			}
			if _, ok := m["heldout_exact_match"]; !ok {
				t.Fatalf("no held-out evaluation of the PPO policy: %v", m)
			}
			ctx := context.Background()
			ck, st := finalState(t, ph.Checkpoint)
			for _, k := range []string{"value_loss", "value_clip_frac", "entropy", "clip_frac", "pg_loss", "return_mean"} {
				if v, ok := st.Scalars[k]; !ok || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("final step: %s = %v (present %v), want finite; scalars %v", k, v, ok, st.Scalars)
				}
			}
			if st.Scalars["value_loss"] <= 0 || st.Scalars["new_value_head"] != 0 {
				t.Fatalf("final step: value_loss %v, new_value_head %v", st.Scalars["value_loss"], st.Scalars["new_value_head"])
			}
			rc, err := ck.Open(ctx, trainapi.CriticFile)
			if err != nil {
				t.Fatalf("the PPO checkpoint has no critic: %v", err)
			}
			f, err := safetensors.Read(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if w, ok := f.Tensor("score.weight"); !ok || len(w.Shape) != 2 || w.Shape[0] != 1 {
				t.Fatalf("critic file: score.weight %v (present %v)", w.Shape, ok)
			}
			mr, err := ck.Open(ctx, trainapi.ModelFile)
			if err != nil {
				t.Fatal(err)
			}
			h, err := safetensors.ReadHeader(mr)
			mr.Close()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := h.Entry("score.weight"); ok {
				t.Fatal("model.safetensors of a PPO checkpoint should hold the causal LM only")
			}
			replayAll(t, env.Client, run.GetID())
		})
	}
}

// TestPPOConfig: the ppo kind's defaults validate and explain; loss.algorithm must match the kind
// (both ways); the ppo block belongs to the ppo kind; bad knobs are named by path. Every case sets
// data.task.
func TestPPOConfig(t *testing.T) {
	for _, c := range []struct {
		kind, raw, path string
	}{
		{"ppo", `{}`, ""},
		{"ppo", `{"group":1,"ppo":{"gamma":0.99,"lambda":1,"kl_coef":0.05},"loss":{"entropy_coef":0.01,"value_clip":0}}`, ""},
		{"grpo", `{}`, ""},
		{"ppo", `{"loss":{"algorithm":"grpo"}}`, "config.loss.algorithm"},
		{"grpo", `{"loss":{"algorithm":"ppo"}}`, "config.loss.algorithm"},
		{"grpo", `{"ppo":{"gamma":1}}`, "config.ppo"},
		{"grpo", `{"group":1}`, "config.group"},
		{"ppo", `{"ppo":null}`, "config.ppo"},
		{"ppo", `{"ppo":{"gamma":2}}`, "config.ppo.gamma"},
		{"ppo", `{"ppo":{"lambda":-1}}`, "config.ppo.lambda"},
		{"ppo", `{"ppo":{"kl_coef":-0.1}}`, "config.ppo.kl_coef"},
		{"ppo", `{"loss":{"value_coef":0}}`, "config.loss.value_coef"},
		{"ppo", `{"loss":{"value_clip":-1}}`, "config.loss"},
		{"ppo", `{"dynamic_sampling":true}`, "config.dynamic_sampling"},
		{"ppo", `{"ppo":{"step_rewards":{"verifier":"prm","coef":0.5,"baseline":0.5}},"reward":{"verifiers":[{"name":"task"},{"name":"prm","report_only":true,"params":{"checkpoint":"file:///p/"}}]}}`, ""},
		{"ppo", `{"ppo":{"step_rewards":{"verifier":"p2"}},"reward":{"verifiers":[{"name":"prm","as":"p2","params":{"checkpoint":"file:///p/"}}]}}`, ""},
		{"ppo", `{"ppo":{"step_rewards":{"verifier":"prm"}},"reward":{"verifiers":[{"name":"prm","as":"p2","params":{"checkpoint":"file:///p/"}}]}}`, "config.ppo.step_rewards.verifier"},
		{"ppo", `{"ppo":{"step_rewards":{"verifier":"task"}},"reward":{"verifiers":[{"name":"task"}]}}`, "config.ppo.step_rewards.verifier"},
		{"ppo", `{"ppo":{"step_rewards":{"verifier":"prm"}}}`, "config.ppo.step_rewards.verifier"},
		{"ppo", `{"ppo":{"step_rewards":{}}}`, "config.ppo.step_rewards.verifier"},
		{"ppo", `{"ppo":{"step_rewards":{"verifier":"prm","coef":-1}}}`, "config.ppo.step_rewards.coef"},
		{"ppo", `{"ppo":{"step_rewards":{"verifier":"prm","baseline":1.5}}}`, "config.ppo.step_rewards.baseline"},
		{"ppo", `{"ppo":{"step_rewards":{"verifier":"prm"}},"rollout":{"tools":["calc"]},"reward":{"verifiers":[{"name":"prm","params":{"checkpoint":"file:///p/"}}]}}`, "config.ppo.step_rewards"},
	} {
		cfg := map[string]any{}
		if err := json.Unmarshal([]byte(c.raw), &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["data"] = map[string]any{"task": "add2"}
		raw, _ := json.Marshal(cfg)
		_, err := workflows.DecodePhaseConfig(c.kind, raw, "config")
		if (err == nil) != (c.path == "") || (err != nil && !strings.HasPrefix(err.Error(), c.path+":")) {
			t.Errorf("%s %s: error %v, want one at %q", c.kind, c.raw, err, c.path)
		}
	}
	k, ok := workflows.LookupPhase("ppo")
	if !ok || k.WorkflowName != "RL-ppo" {
		t.Fatalf("ppo kind: %+v registered %v", k, ok)
	}
	s, err := workflows.ExplainPhase("ppo")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ppo.gamma", "ppo.lambda", "loss.value_coef", "loss.value_clip", "loss.entropy_coef", `"value_coef":0.5`, `"lambda":0.95`} {
		if !strings.Contains(s, want) {
			t.Errorf("explain ppo lacks %q:\n%s", want, s)
		}
	}
}

// freshPRM commits a process reward model for tests: a fresh tiny model with a value head (the
// reward phase's RewardInit), which a prm verifier scores steps with (its scores are near 0.5; what
// the test checks is that they reach the policy step, not what they say).
func freshPRM(t *testing.T) string {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	aenv := ts.NewTestActivityEnvironment()
	rewardmodel.Register(aenv, &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: workers.NewTrainEngine(workers.EngineOptions{})})
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxSeq = 64
	v, err := aenv.ExecuteActivity(trainapi.RewardInitName, trainapi.RewardInitInput{Store: "file://" + t.TempDir(), Run: "p", Phase: "prm", Model: modelcfg.Config(cfg), Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	var out trainapi.RewardInitOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out.Checkpoint
}

// TestPPOStepRewards runs sft → ppo on the real server with a prm verifier (report_only) beside the
// task's checker and ppo.step_rewards on its label: the step scores travel from the reward role to
// the trainer in the verdicts objects (the history carries their URIs only), every step reports
// step_rewards_per_sample and step_rewards_cut (some completion's steps were scored: placed or
// cut), and step_reward_mean when any was placed; the histories replay.
func TestPPOStepRewards(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	prm := freshPRM(t)
	extra := fmt.Sprintf(`{"iterations":2,"max_new_tokens":24,"reward":{"verifiers":[{"name":"task"},{"name":"prm","as":"steps","report_only":true,
		"params":{"checkpoint":%q,"max_steps":4}}]},"ppo":{"step_rewards":{"verifier":"steps","coef":1,"baseline":0.5}}}`, prm)
	in := ppoPipeline(t, extra)
	out, id := runPipeline(t, env, in, 10*time.Minute)
	ph := out.Phases[1]
	t.Logf("ppo phase: %v", ph.Metrics)
	if ph.Metrics["iterations"] != 2 {
		t.Fatalf("ppo phase: %v", ph.Metrics)
	}
	_, st := finalState(t, ph.Checkpoint)
	m := st.Scalars
	t.Logf("final step: step_rewards_per_sample %v, step_rewards_cut %v, step_reward_mean %v, step_score_mean %v",
		m["step_rewards_per_sample"], m["step_rewards_cut"], m["step_reward_mean"], m["step_score_mean"])
	placed, hasPlaced := m["step_rewards_per_sample"]
	if _, hasCut := m["step_rewards_cut"]; !hasPlaced || !hasCut || !(placed+m["step_rewards_cut"] > 0) {
		t.Fatalf("final step: no step scores reached the trainer: %v", m)
	}
	if r, ok := m["step_reward_mean"]; placed > 0 && (!ok || !(r >= -0.5 && r <= 0.5)) {
		t.Fatalf("final step: step_reward_mean %v (present %v) with %v steps placed a sample, want one in [−0.5, 0.5]", r, ok, placed)
	}
	replayAll(t, env.Client, id)
}
