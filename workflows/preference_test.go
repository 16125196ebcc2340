package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/lm"
	"github.com/temperml/temper/activities/train/preference"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// trainerWorker starts a trainer worker with the families' activities, registered here by name so
// that a test does not depend on what workers.Register lists.
func trainerWorker(t *testing.T, env *testenv.Env, families ...func(train.Registrar, *train.Activities)) {
	t.Helper()
	deps := &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: workers.NewTrainEngine(workers.EngineOptions{})}
	env.Worker(t, workflows.QueueTrainer, func(r worker.Registry) {
		for _, register := range families {
			register(r, deps)
		}
	})
}

// prefTrainer starts a trainer worker with the activities the sft and preference phases use.
func prefTrainer(t *testing.T, env *testenv.Env) {
	t.Helper()
	trainerWorker(t, env, train.Register, lm.Register, preference.Register)
}

func runPipeline(t *testing.T, env *testenv.Env, in workflows.PipelineInput, timeout time.Duration) (workflows.PipelineOutput, string) {
	t.Helper()
	id := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.QueueTemper, WorkflowExecutionTimeout: timeout,
	}, workflows.PipelineName, in)
	if err != nil {
		t.Fatalf("start pipeline: %v", err)
	}
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	return out, id
}

// TestPreferencePipeline runs a tiny sft → dpo pipeline (reference log-probs precomputed) with a kto
// phase from the same sft checkpoint (reference on the fly), through the real server: both finish, report
// held-out preference metrics before and after, continue as new on the way, and replay.
func TestPreferencePipeline(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	prefTrainer(t, env)
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":300,"heldout_examples":16},
		"batch":{"rows":8,"seq":32},"steps":6,"chunk_steps":6,"eval":{"examples":16,"max_new_tokens":4,"before":false}}`
	pref := `{"data":{"task":"add2","train_examples":64,"heldout_examples":16},"batch":{"rows":8,"seq":16},
		"steps":4,"chunk_steps":2,"eval":{"examples":16,"max_new_tokens":4,"kl_tokens":4},"heartbeat_timeout":"10s"%s}`
	in := workflows.PipelineInput{Name: "pref", Store: "file://" + t.TempDir(), Seed: 3, Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
		{Name: "dpo", Kind: "dpo", Config: json.RawMessage(fmt.Sprintf(pref, ""))},
		{Name: "kto", Kind: "kto", From: "sft", Config: json.RawMessage(fmt.Sprintf(pref, `,"reference":"on_the_fly"`))},
	}}
	out, id := runPipeline(t, env, in, 5*time.Minute)
	if len(out.Phases) != 3 {
		t.Fatalf("phases: %+v", out.Phases)
	}
	for _, r := range out.Phases[1:] {
		m := r.Metrics
		t.Logf("%s: %v", r.Name, m)
		if !strings.HasSuffix(r.Checkpoint, "/"+r.Name+"/step-000004/") || m["steps"] != 4 {
			t.Errorf("%s: checkpoint %s, steps %v", r.Name, r.Checkpoint, m["steps"])
		}
		for _, k := range []string{"heldout_pref_accuracy", "heldout_pref_accuracy_before", "heldout_reward_margin", "heldout_kl_sampled",
			"heldout_exact_match", "heldout_exact_match_before", "train_rewards/margin"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: no metric %s", r.Name, k)
			}
		}
		if m["heldout_reward_margin_before"] != 0 || m["heldout_kl_ref_before"] != 0 {
			t.Errorf("%s: the starting checkpoint is the reference, yet margin %v and KL %v before training", r.Name,
				m["heldout_reward_margin_before"], m["heldout_kl_ref_before"])
		}
	}
	assertChildFrom(t, env.Client, id+".kto", out.Phases[0].Checkpoint)
	// The dpo phase computed its reference once and stored it with the data; kto did not.
	refs := listStore(t, in.Store, "runs/"+id+"/dpo/ref/")
	if len(refs) != 1 || len(listStore(t, in.Store, "runs/"+id+"/kto/ref/")) != 0 {
		t.Errorf("reference objects: dpo %v", refs)
	}
	replayAll(t, env.Client, id)
}

func listStore(t *testing.T, root, prefix string) []string {
	t.Helper()
	st, err := ckpt.Open(context.Background(), root, ckpt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	objs, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

// TestPreferenceConfig: every kind's defaults validate; loss.kind must match the phase kind; bad values
// name their field.
func TestPreferenceConfig(t *testing.T) {
	for _, kind := range workflows.PrefKinds {
		if _, err := workflows.DecodePhaseConfig(kind, json.RawMessage(`{"data":{"task":"add2"}}`), "config"); err != nil {
			t.Errorf("%s defaults: %v", kind, err)
		}
		if _, err := workflows.ExplainPhase(kind); err != nil {
			t.Errorf("%s explain: %v", kind, err)
		}
	}
	for _, c := range []struct{ kind, cfg, path string }{
		{"dpo", `{"data":{"task":"add2"},"loss":{"kind":"ipo"}}`, "config.loss.kind"},
		{"dpo", `{"data":{"task":"add2"},"loss":{"beta":-1}}`, "config.loss"},
		{"orpo", `{"data":{"task":"add2"},"loss":{"beta":0.1}}`, "config.loss"},
		{"kto", `{"data":{"task":"add2"},"reference":"cached"}`, "config.reference"},
		{"dpo", `{"data":{}}`, "config.data"},
		{"dpo", `{"data":{"task":"router","from_model":{"samples":1}}}`, "config.data.from_model.samples"},
		{"simpo", `{"data":{"task":"add2"},"batch":{"rows":0,"seq":16}}`, "config.batch.rows"},
		{"dpo", `{"data":{"task":"add2"},"refernce":"on_the_fly"}`, "config.refernce"},
	} {
		_, err := workflows.DecodePhaseConfig(c.kind, json.RawMessage(c.cfg), "config")
		fe, ok := err.(*config.FieldError)
		if !ok || fe.Path != c.path {
			t.Errorf("%s %s: got %v, want an error at %s", c.kind, c.cfg, err, c.path)
		}
	}
}

// TestPreferenceAcceptance is issue 7's acceptance experiment (not part of the default run: set
// TEMPER_PREF_ACCEPT=1; about 25 minutes on 2 busy cores). It trains an SFT model on add2 from scratch
// (150 steps: a weak start, held-out exact match 4%), then runs dpo and kto from it (5,000 steps each,
// with the RPO NLL term sft_coef 1, without which both log-probs collapse) on synthetic pairs (correct
// answer vs a plausible mistake) and reports, before (the SFT model) and after, the held-out rate at
// which each model prefers the verified-correct answer (log π(correct) > log π(mistake)) and the rate at
// which it produces it (greedy exact match). The issue asks for a gain of at least 20 points in the
// rate at which the model "prefers/produces" the correct answer; the test fails when a kind gains less
// than 20 points on both.
//
// For calibration: TEMPER_PREF_SFT (JSON merged into the sft config), TEMPER_PREF_PRETRAIN ("1" or
// JSON: pretrain first as the demo does), TEMPER_PREF_CFG (merged into both preference configs;
// TEMPER_PREF_CFG_DPO etc. for one kind), TEMPER_PREF_KINDS (default "dpo,kto"), TEMPER_PREF_FROM (an SFT
// checkpoint URI: skips sft) and TEMPER_PREF_STORE (a store URI kept after the test).
func TestPreferenceAcceptance(t *testing.T) {
	if os.Getenv("TEMPER_PREF_ACCEPT") == "" {
		t.Skip("acceptance experiment: set TEMPER_PREF_ACCEPT=1 (a few minutes on 2 cores)")
	}
	merge := func(base, extra string) json.RawMessage { return mergeConfigs(t, base, extra) }
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	prefTrainer(t, env)
	sft := merge(acceptSFT, os.Getenv("TEMPER_PREF_SFT"))
	store := os.Getenv("TEMPER_PREF_STORE")
	if store == "" {
		store = "file://" + t.TempDir()
	}
	kinds := strings.Split(os.Getenv("TEMPER_PREF_KINDS"), ",")
	if kinds[0] == "" {
		kinds = []string{"dpo", "kto"}
	}
	from := os.Getenv("TEMPER_PREF_FROM")
	var phases []workflows.PhaseSpec
	if from == "" {
		if p := os.Getenv("TEMPER_PREF_PRETRAIN"); p != "" {
			if p == "1" {
				p = ""
			}
			phases = append(phases, workflows.PhaseSpec{Name: "pretrain", Kind: "pretrain", Config: merge(acceptPretrain, p)})
		}
		phases = append(phases, workflows.PhaseSpec{Name: "sft", Kind: "sft", Config: sft})
		from = "sft"
	}
	for _, k := range kinds {
		cfg := merge(acceptPref, acceptPrefKind[k])
		cfg = merge(string(cfg), os.Getenv("TEMPER_PREF_CFG"))
		cfg = merge(string(cfg), os.Getenv("TEMPER_PREF_CFG_"+strings.ToUpper(k)))
		phases = append(phases, workflows.PhaseSpec{Name: k, Kind: k, From: from, Config: cfg})
	}
	for _, p := range phases {
		t.Logf("%s: %s", p.Name, p.Config)
	}
	started := time.Now()
	out, _ := runPipeline(t, env, workflows.PipelineInput{Name: "pref-accept", Store: store, Seed: 1, Phases: phases}, 2*time.Hour)
	for _, r := range out.Phases {
		m := r.Metrics
		if r.Kind == "sft" || r.Kind == "pretrain" {
			t.Logf("%s %s (%.0fs): held-out exact match %.1f%%", r.Kind, r.Checkpoint, r.Seconds, 100*m["heldout_exact_match"])
			continue
		}
		if m["data_pairs"] > 0 {
			t.Logf("%s data from the model's samples: %v", r.Name, map[string]float64{"pairs": m["data_pairs"], "heldout_pairs": m["data_heldout_pairs"],
				"sample_rate": m["data_sample_rate"], "none_correct": m["data_none_correct"], "all_correct": m["data_all_correct"]})
		}
		before, after := m["heldout_pref_accuracy_before"], m["heldout_pref_accuracy"]
		t.Logf("%s (%.0f steps, %.0fs): prefers the correct answer %.1f%% → %.1f%% (length-normalised %.1f%% → %.1f%%); "+
			"exact match %.1f%% → %.1f%%; held-out reward accuracy %.3f, margin %.3f; KL sampled %.3f; log π chosen %.2f → %.2f, rejected %.2f → %.2f; last chunk: pref accuracy %.3f, reward accuracy %.3f",
			r.Name, m["steps"], r.Seconds, 100*before, 100*after, 100*m["heldout_pref_accuracy_norm_before"], 100*m["heldout_pref_accuracy_norm"],
			100*m["heldout_exact_match_before"], 100*m["heldout_exact_match"], m["heldout_reward_accuracy"], m["heldout_reward_margin"],
			m["heldout_kl_sampled"], m["heldout_logp_chosen_before"], m["heldout_logp_chosen"], m["heldout_logp_rejected_before"], m["heldout_logp_rejected"],
			m["train_pref_accuracy"], m["train_rewards/accuracy"])
		em := m["heldout_exact_match"] - m["heldout_exact_match_before"]
		if after-before < 0.20 && em < 0.20 {
			t.Errorf("%s: held-out preference for the correct answer rose %.1f points and exact match %.1f, want ≥ 20 on one", r.Name, 100*(after-before), 100*em)
		}
	}
	t.Logf("total %.0fs", time.Since(started).Seconds())
}

// The acceptance experiment's configs (see TestPreferenceAcceptance); acceptPretrain is the demo's pretraining (opt-in).
const (
	acceptPretrain = `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":8000,"heldout_examples":200},
		"batch":{"rows":16,"seq":64},"steps":600,"chunk_steps":600,"optimizer":{"lr":0.01,"warmup_steps":30},
		"eval":{"examples":200,"max_new_tokens":5,"before":false},"heartbeat_timeout":"2m"}`
	acceptSFT = `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":2000,"heldout_examples":200},
		"batch":{"rows":32,"seq":32},"steps":150,"chunk_steps":150,"optimizer":{"lr":0.003,"warmup_steps":10},
		"eval":{"examples":200,"max_new_tokens":5,"before":false},"heartbeat_timeout":"2m"}`
	acceptPref = `{"data":{"task":"add2","train_examples":8000,"heldout_examples":200},"batch":{"rows":32,"seq":16},
		"loss":{"beta":0.5,"sft_coef":1},"steps":5000,"chunk_steps":1000,"optimizer":{"lr":0.0005,"warmup_steps":10},
		"eval":{"examples":200,"max_new_tokens":5,"kl_tokens":5},"heartbeat_timeout":"2m"}`
)

// acceptPrefKind holds per-kind settings (none needed since sft_coef keeps kto stable at dpo's rate).
var acceptPrefKind = map[string]string{}

// mergeConfigs merges JSON objects (later ones win; "" is skipped) into one config.
func mergeConfigs(t *testing.T, parts ...string) json.RawMessage {
	t.Helper()
	m := map[string]any{}
	for _, s := range parts {
		if s == "" {
			continue
		}
		if err := mergeJSON(m, s); err != nil {
			t.Fatalf("config %s: %v", s, err)
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// mergeJSON merges the JSON object s into m, recursively for nested objects.
func mergeJSON(m map[string]any, s string) error {
	var add map[string]any
	if err := json.Unmarshal([]byte(s), &add); err != nil {
		return err
	}
	var rec func(dst, src map[string]any)
	rec = func(dst, src map[string]any) {
		for k, v := range src {
			if sv, ok := v.(map[string]any); ok {
				if dv, ok := dst[k].(map[string]any); ok {
					rec(dv, sv)
					continue
				}
			}
			dst[k] = v
		}
	}
	rec(m, add)
	return nil
}
