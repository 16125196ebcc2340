package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/rollout"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestSearchConfig: the defaults validate and explain; bad values and bad from_data name their
// field and the allowed values.
func TestSearchConfig(t *testing.T) {
	if _, err := workflows.DecodePhaseConfig("search", json.RawMessage(`{"data":{"task":"expr"}}`), "config"); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	text, err := workflows.ExplainPhase("search")
	if err != nil || !strings.Contains(text, "c_puct") || !strings.Contains(text, "budget_tokens") {
		t.Fatalf("explain: %v\n%s", err, text)
	}
	for _, c := range []struct{ cfg, path, msg string }{
		{`{"data":{"task":"expr"},"search":{"strategy":"beam"}}`, "config.search.strategy", "allowed values: mcts, sample"},
		{`{"data":{"task":"expr"},"search":{"step":"word"}}`, "config.search.step", "allowed values: line, tokens"},
		{`{"data":{"task":"expr"},"search":{"c_puct":-1}}`, "config.search.c_puct", ">= 0"},
		{`{"data":{"task":"expr"},"search":{"expand":0}}`, "config.search.expand", "1..64"},
		{`{"data":{"task":"expr"},"search":{"margin":1.5}}`, "config.search.margin", "margin < 1"},
		{`{"data":{"task":"expr"},"search":{"temperature":0}}`, "config.search.temperature", "> 0"},
		{`{"data":{"task":"expr","train_examples":10},"prompts":20}`, "config.prompts", "more than data.train_examples"},
		{`{"data":{"task":"expr"},"batch_prompts":0}`, "config.batch_prompts", "1..1024"},
		{`{"data":{"task":"exp"}}`, "config.data.task", `did you mean "expr"`},
		{`{"data":{"task":"expr"},"search":{"simulatons":3}}`, "config.search.simulatons", "simulations"},
	} {
		_, err := workflows.DecodePhaseConfig("search", json.RawMessage(c.cfg), "config")
		fe, ok := err.(*config.FieldError)
		if !ok || fe.Path != c.path || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: got %v, want %s naming %q", c.cfg, err, c.path, c.msg)
		}
	}
	sft := json.RawMessage(`{"data":{"task":"expr"}}`)
	for _, c := range []struct {
		phases []workflows.PhaseSpec
		path   string
		msg    string
	}{
		{[]workflows.PhaseSpec{{Name: "a", Kind: "sft", Config: sft}, {Name: "b", Kind: "sft", FromData: "a", Config: sft}},
			"phases[1].from_data", "writes no data (kinds that do: search)"},
		{[]workflows.PhaseSpec{{Name: "a", Kind: "sft", FromData: "b", Config: sft}, {Name: "b", Kind: "search", Config: sft}},
			"phases[0].from_data", "not an earlier phase"},
		{[]workflows.PhaseSpec{{Name: "a", Kind: "search", From: "file:///m/", Config: sft}, {Name: "b", Kind: "search", FromData: "a", Config: sft}},
			"phases[1].from_data", "does not train on another phase's data"},
		{[]workflows.PhaseSpec{{Name: "a", Kind: "search", Config: sft}},
			"phases[0].from", "a search phase samples from a model"},
	} {
		in := workflows.PipelineInput{Phases: c.phases}
		err := in.Validate()
		fe, ok := err.(*config.FieldError)
		if !ok || fe.Path != c.path || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: got %v, want %s naming %q", c.phases, err, c.path, c.msg)
		}
	}
}

// rolloutWorker starts a rollout worker with the search activities (registered by name, so the
// test does not depend on what workers.Register lists).
func rolloutWorker(t *testing.T, env *testenv.Env) {
	t.Helper()
	ro := &rollout.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: workers.NewTrainEngine(workers.EngineOptions{})}
	env.Worker(t, workflows.QueueRollout, func(r worker.Registry) {
		r.RegisterActivityWithOptions(ro.Search, activity.RegisterOptions{Name: rolloutapi.SearchName})
		r.RegisterActivityWithOptions(ro.SearchData, activity.RegisterOptions{Name: rolloutapi.SearchDataName})
	})
}

// Tiny-model configs of the search tests: the sft phase nearly memorises a few expr examples, so
// the search over the same prompts finds verified solutions and, among its failures, pairs.
const (
	searchSFT = `{"model":{"preset":"tiny"},"data":{"task":"expr","train_examples":8,"heldout_examples":8},
		"batch":{"rows":8,"seq":48},"steps":80,"chunk_steps":80,"optimizer":{"lr":0.01,"warmup_steps":5},
		"eval":{"examples":8,"max_new_tokens":40,"before":false}}`
	searchCfg = `{"data":{"task":"expr","train_examples":8,"heldout_examples":8},"prompts":8,"batch_prompts":4,
		"search":{"expand":3,"simulations":6,"max_new_tokens":40,"margin":0.2}}`
)

// TestSearchToDPO runs sft → search → dpo (from_data: search) → sft (from_data: search) on the
// real server: the search writes verified solutions and pairs whose chosen side passes the task's
// checker and whose rejected side fails it, reports its tree statistics, passes its starting
// checkpoint on, and both following phases train on its data.
func TestSearchToDPO(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	prefTrainer(t, env)
	rolloutWorker(t, env)
	dpo := `{"data":{"task":"expr","train_examples":8,"heldout_examples":8},"batch":{"rows":4,"seq":48},
		"steps":2,"chunk_steps":2,"eval":{"examples":8,"max_new_tokens":40,"kl_tokens":0}}`
	sft2 := `{"data":{"task":"expr"},"batch":{"rows":4,"seq":48},"steps":2,"chunk_steps":2,
		"eval":{"examples":8,"max_new_tokens":40,"before":false}}`
	in := workflows.PipelineInput{Name: "search", Store: "file://" + t.TempDir(), Seed: 4, Phases: []workflows.PhaseSpec{
		{Name: "base", Kind: "sft", Config: json.RawMessage(searchSFT)},
		{Name: "search", Kind: "search", Config: json.RawMessage(searchCfg)},
		{Name: "dpo", Kind: "dpo", FromData: "search", Config: json.RawMessage(dpo)},
		{Name: "sft", Kind: "sft", From: "base", FromData: "search", Config: json.RawMessage(sft2)},
	}}
	out, id := runPipeline(t, env, in, 10*time.Minute)
	if len(out.Phases) != 4 {
		t.Fatalf("phases: %+v", out.Phases)
	}
	base, s := out.Phases[0], out.Phases[1]
	t.Logf("base: %v", base.Metrics)
	t.Logf("search: %v", s.Metrics)
	if s.Checkpoint != base.Checkpoint || s.Data == nil || s.Data.SFT == "" || s.Data.Pairs == "" || s.Data.Heldout == "" {
		t.Fatalf("search result %+v: want the base checkpoint passed on and three data objects", s)
	}
	m := s.Metrics
	if m["search_prompts"] != 8 || m["search_nodes_mean"] < 3 || m["search_depth_max"] < 2 || m["data_forward_tokens"] <= 0 {
		t.Errorf("search metrics %v", m)
	}
	if m["data_examples"] < 1 || m["data_pairs"] < 1 {
		t.Fatalf("search found %v solutions and %v pairs: the test needs both", m["data_examples"], m["data_pairs"])
	}
	task, _ := tasks.Lookup("expr")
	sft := readStoreLines(t, s.Data.SFT, tasks.ReadAll)
	for _, ex := range sft {
		if ok, fb := task.Check(ex, ex.Completion); !ok {
			t.Errorf("sft example %q → %q fails: %s", ex.Prompt, ex.Completion, fb)
		}
	}
	pairs := readStoreLines(t, s.Data.Pairs, tasks.ReadPrefAll)
	for _, p := range pairs {
		ex := tasks.Example{Prompt: p.Prompt, Answer: p.Answer}
		okC, _ := task.Check(ex, p.Chosen)
		okR, _ := task.Check(ex, p.Rejected)
		if !okC || okR {
			t.Errorf("pair %+v: chosen passes %v, rejected passes %v", p, okC, okR)
		}
	}
	if len(sft) != int(m["data_examples"]) || len(pairs) != int(m["data_pairs"]) {
		t.Errorf("%d sft lines and %d pairs; metrics say %v and %v", len(sft), len(pairs), m["data_examples"], m["data_pairs"])
	}
	for _, r := range out.Phases[2:] {
		if r.Metrics["steps"] != 2 {
			t.Errorf("%s: metrics %v", r.Name, r.Metrics)
		}
	}
	if _, ok := out.Phases[2].Metrics["heldout_pref_accuracy"]; !ok {
		t.Errorf("dpo: no held-out preference accuracy: %v", out.Phases[2].Metrics)
	}
	assertChildFrom(t, env.Client, id+".sft", base.Checkpoint)
	replayAll(t, env.Client, id)
}

func readStoreLines[T any](t *testing.T, uri string, read func(io.Reader, string) ([]T, error)) []T {
	t.Helper()
	b, err := ckpt.New(ckpt.Options{}).ReadObject(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	out, err := read(strings.NewReader(string(b)), uri)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSearchAcceptance is acceptance 2 of the search issue: per seed, a base model is fine-tuned
// on a little expr data; then a search phase (mcts) and its peer (strategy sample: best-of-N
// rejection sampling) each spend the same forward-token budget per prompt on the same training
// prompts, and an sft phase from the base model trains on each one's verified solutions
// (from_data). It logs, per seed, each side's solved rate, data, forward tokens spent and the
// held-out exact match after sft, and fails when search → sft does not beat rejection → sft in
// every seed: a result, not a tuned pass.
//
// Overrides (JSON merged into a config): TEMPER_SEARCH_BASE, TEMPER_SEARCH_CFG (both data
// generators), TEMPER_SEARCH_SFT; TEMPER_SEARCH_SEEDS (default "1,2"); TEMPER_SEARCH_STORE keeps
// the store; TEMPER_SEARCH_FROM (a base checkpoint URI) skips the base phase, so every seed starts
// from that one model.
func TestSearchAcceptance(t *testing.T) {
	if os.Getenv("TEMPER_SEARCH_ACCEPT") == "" {
		t.Skip("acceptance experiment: set TEMPER_SEARCH_ACCEPT=1 (scripts/search-vs-rejection.sh)")
	}
	merge := func(parts ...string) json.RawMessage { return mergeConfigs(t, parts...) }
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	prefTrainer(t, env)
	rolloutWorker(t, env)
	store := os.Getenv("TEMPER_SEARCH_STORE")
	if store == "" {
		store = "file://" + t.TempDir()
	}
	seeds := os.Getenv("TEMPER_SEARCH_SEEDS")
	if seeds == "" {
		seeds = "1,2"
	}
	gen := merge(acceptSearch, os.Getenv("TEMPER_SEARCH_CFG"))
	var wins, runs float64
	var diff float64
	for _, s := range strings.Split(seeds, ",") {
		seed, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("TEMPER_SEARCH_SEEDS: %v", err)
		}
		// The generators search fresh prompts (a data seed of their own): not the base's training set.
		data := fmt.Sprintf(`{"data":{"seed":%d}}`, 1000+seed)
		from := os.Getenv("TEMPER_SEARCH_FROM")
		var phases []workflows.PhaseSpec
		if from == "" {
			from = "base"
			phases = append(phases, workflows.PhaseSpec{Name: "base", Kind: "sft", Config: merge(acceptSearchBase, os.Getenv("TEMPER_SEARCH_BASE"))})
		}
		phases = append(phases, []workflows.PhaseSpec{
			{Name: "mcts", Kind: "search", From: from, Config: merge(string(gen), data, `{"search":{"strategy":"mcts"}}`)},
			{Name: "rejection", Kind: "search", From: from, Config: merge(string(gen), data, `{"search":{"strategy":"sample"}}`)},
			{Name: "sft-mcts", Kind: "sft", From: from, FromData: "mcts", Config: merge(acceptSearchSFT, os.Getenv("TEMPER_SEARCH_SFT"))},
			{Name: "sft-rejection", Kind: "sft", From: from, FromData: "rejection", Config: merge(acceptSearchSFT, os.Getenv("TEMPER_SEARCH_SFT"))},
		}...)
		started := time.Now()
		out, _ := runPipeline(t, env, workflows.PipelineInput{Name: fmt.Sprintf("search-accept-%d", seed), Store: store, Seed: seed, Phases: phases}, 3*time.Hour)
		r := map[string]workflows.PhaseResult{}
		for _, p := range out.Phases {
			r[p.Name] = p
		}
		if b, ok := r["base"]; ok {
			t.Logf("seed %d: base %s held-out exact match %.1f%% (curve %v)", seed, b.Checkpoint, 100*b.Metrics["heldout_exact_match"], b.Curve)
		} else {
			t.Logf("seed %d: base %s (TEMPER_SEARCH_FROM)", seed, from)
		}
		t.Logf("seed %d: %.0fs", seed, time.Since(started).Seconds())
		if r["mcts"].Metrics["data_examples"] == 0 || r["rejection"].Metrics["data_examples"] == 0 {
			t.Fatalf("seed %d: a generator solved nothing (mcts %v, rejection %v): the base is too weak to compare", seed, r["mcts"].Metrics, r["rejection"].Metrics)
		}
		for _, side := range []string{"mcts", "rejection"} {
			g, f := r[side].Metrics, r["sft-"+side].Metrics
			t.Logf("seed %d %-9s: solved %.1f%% of %.0f prompts, %.0f sft examples, %.0f pairs, forward tokens %.0f (%.0f per prompt), nodes %.1f, depth %.2f → sft held-out exact match %.1f%% (the base: %.1f%%)",
				seed, side, 100*g["search_solved_rate"], g["search_prompts"], g["data_examples"], g["data_pairs"], g["data_forward_tokens"], g["data_forward_tokens_per_prompt"],
				g["search_nodes_mean"], g["search_depth_mean"], 100*f["heldout_exact_match"], 100*f["heldout_exact_match_before"])
		}
		d := r["sft-mcts"].Metrics["heldout_exact_match"] - r["sft-rejection"].Metrics["heldout_exact_match"]
		diff += d
		runs++
		if d > 0 {
			wins++
		}
		t.Logf("seed %d: search → sft minus rejection → sft = %+.1f points", seed, 100*d)
	}
	t.Logf("search won %.0f of %.0f seeds; mean difference %+.1f points", wins, runs, 100*diff/runs)
	if wins < runs {
		t.Errorf("search → sft did not beat rejection sampling → sft at the same forward-token budget in every seed (won %.0f of %.0f, mean %+.1f points)", wins, runs, 100*diff/runs)
	}
}

// The acceptance experiment's configs (TestSearchAcceptance). The base is the small preset: the tiny
// one had not learned expr's rewrites after 2,000 steps (held-out exact match 0, loss 1.19). It is
// trained for 500 steps at a constant learning rate after warmup (a checkpoint of a run in progress,
// still plastic: 3-13% on its 100 evaluation prompts), so the generators find some solutions and not others. From a
// finished 1,500-step base both solve ~87% of the prompts and their sft phases tie; from a 500-step
// base whose cosine had decayed, sft moved it little (10% -> 11-15%) and search's data won by +4.0
// and +0.4 points (docs/benchmarks.md, "Search vs rejection sampling"). Every side is scored on 500
// held-out prompts (one prompt: 0.2 points).
const (
	acceptSearchBase = `{"model":{"preset":"small"},"data":{"task":"expr","train_examples":4000,"heldout_examples":200},
		"batch":{"rows":32,"seq":48},"steps":500,"chunk_steps":250,"optimizer":{"lr":0.003,"warmup_steps":50,"min_lr_ratio":1},
		"eval":{"examples":100,"max_new_tokens":40,"before":false,"every_chunks":2},"heartbeat_timeout":"2m"}`
	acceptSearch = `{"data":{"task":"expr","train_examples":400,"heldout_examples":500},"prompts":400,"batch_prompts":25,
		"search":{"expand":4,"simulations":1000,"budget_tokens":400,"max_new_tokens":40,"margin":0.2},"heartbeat_timeout":"2m"}`
	acceptSearchSFT = `{"data":{"task":"expr"},"batch":{"rows":16,"seq":48},"steps":100,"chunk_steps":100,
		"optimizer":{"lr":0.001,"warmup_steps":10},"eval":{"examples":500,"max_new_tokens":40,"before":true},"heartbeat_timeout":"2m"}`
)
