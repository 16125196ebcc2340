package preference_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/workers/traintest"
)

// start commits a seeded tiny model as the phase's starting checkpoint (a stand-in for an SFT model).
func start(e *traintest.Env, seed uint64) string {
	e.T.Helper()
	cfg, err := model.Preset("tiny")
	if err != nil {
		e.T.Fatal(err)
	}
	cfg.MaxSeq = 64
	var out trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "r", Phase: "sft", Model: modelcfg.Config(cfg), Seed: seed}, &out)
	return out.Checkpoint
}

func prefTestData() trainapi.PrefDataSpec {
	return trainapi.PrefDataSpec{Task: "add2", TrainExamples: 48, HeldoutExamples: 16}
}

func prefTestOptim() trainapi.Optim {
	return trainapi.Optim{LR: 3e-3, WarmupSteps: 1, MinLRRatio: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}
}

func chunk(e *traintest.Env, phase, from string, step, steps, total int, cur data.Cursor, kind, refData, reference string) trainapi.ChunkOutput {
	e.T.Helper()
	var out trainapi.ChunkOutput
	e.Must(trainapi.PrefChunkName, trainapi.PrefChunkInput{ChunkHead: trainapi.ChunkHead{Store: e.Store, Run: "r", Phase: phase, From: from, Step: step, Steps: steps, TotalSteps: total, Cursor: cur, Optim: prefTestOptim(), FreshOptimizer: step == 0},
		Data: prefTestData(), RefData: refData, Reference: reference, Batch: trainapi.BatchSpec{Rows: 8, Seq: 16}, Loss: losscfg.DefaultPreference(kind)}, &out)
	return out
}

// TestPrefChunkResumesBitIdentical: for dpo (precomputed reference) and kto (reference on the fly), a
// phase trained as one chunk of 4 steps and as two chunks of 2 ends with the same weights and optimizer
// state bit for bit; a retried chunk returns the committed one; training moves the implicit reward in
// the right direction (chosen up relative to rejected).
func TestPrefChunkResumesBitIdentical(t *testing.T) {
	e := traintest.New(t)
	from := start(e, 3)
	for _, c := range []struct{ kind, mode string }{{losscfg.PrefDPO, trainapi.RefPrecomputed}, {losscfg.PrefKTO, trainapi.RefOnTheFly}, {losscfg.PrefSimPO, ""}} {
		t.Run(c.kind, func(t *testing.T) {
			refData, reference := "", ""
			switch c.mode {
			case trainapi.RefPrecomputed:
				var ro trainapi.RefLogProbsOutput
				e.Must(trainapi.RefLogProbsName, trainapi.RefLogProbsInput{Store: e.Store, Run: "r", Phase: c.kind + "-a", Reference: from, Data: prefTestData(),
					Kind: c.kind, Seq: 16, Seed: 5}, &ro)
				if ro.Examples != 48 || !strings.Contains(ro.RefData, "/runs/r/"+c.kind+"-a/ref/") {
					t.Fatalf("ref data: %+v", ro)
				}
				var again trainapi.RefLogProbsOutput
				e.Must(trainapi.RefLogProbsName, trainapi.RefLogProbsInput{Store: e.Store, Run: "r", Phase: c.kind + "-a", Reference: from, Data: prefTestData(),
					Kind: c.kind, Seq: 16, Seed: 5}, &again)
				if !again.Resumed || again.RefData != ro.RefData {
					t.Fatalf("retried RefLogProbs: %+v, want the object %s", again, ro.RefData)
				}
				refData = ro.RefData
			case trainapi.RefOnTheFly:
				reference = from
			}
			cur := data.Cursor{Seed: 5}
			whole := chunk(e, c.kind+"-a", from, 0, 4, 4, cur, c.kind, refData, reference)
			h1 := chunk(e, c.kind+"-b", from, 0, 2, 4, cur, c.kind, refData, reference)
			h2 := chunk(e, c.kind+"-b", h1.Checkpoint, 2, 2, 4, h1.Cursor, c.kind, refData, reference)
			if whole.Step != 4 || h2.Step != 4 || whole.Cursor != h2.Cursor {
				t.Fatalf("steps %d/%d, cursors %+v/%+v", whole.Step, h2.Step, whole.Cursor, h2.Cursor)
			}
			for _, f := range []string{trainapi.ModelFile, trainapi.OptimizerFile} {
				if traintest.SHA(t, whole.Checkpoint, f) != traintest.SHA(t, h2.Checkpoint, f) {
					t.Errorf("%s differs between one chunk of 4 and two of 2", f)
				}
			}
			if math.Float64bits(whole.LastLoss) != math.Float64bits(h2.LastLoss) {
				t.Errorf("last loss %v vs %v", whole.LastLoss, h2.LastLoss)
			}
			again := chunk(e, c.kind+"-b", h1.Checkpoint, 2, 2, 4, h1.Cursor, c.kind, refData, reference)
			if !again.Resumed || again.Checkpoint != h2.Checkpoint || again.Loss != h2.Loss || again.Metrics["rewards/margin"] != h2.Metrics["rewards/margin"] {
				t.Fatalf("retried chunk: %+v, want the committed %+v", again, h2)
			}
			t.Logf("%s: loss %.4f → %.4f, metrics %v", c.kind, h1.Loss, h2.LastLoss, h2.Metrics)
			if c.kind == losscfg.PrefDPO && !(h2.Metrics["rewards/margin"] > 0) {
				t.Errorf("dpo: reward margin %v after 4 steps, want > 0", h2.Metrics["rewards/margin"])
			}
		})
	}
}

// TestPrefReferencePathsAgree: the first step's loss is the same with precomputed reference
// log-probs and with the reference scored on the fly.
func TestPrefReferencePathsAgree(t *testing.T) {
	e := traintest.New(t)
	from := start(e, 4)
	for _, kind := range []string{losscfg.PrefDPO, losscfg.PrefIPO, losscfg.PrefKTO} {
		var ro trainapi.RefLogProbsOutput
		e.Must(trainapi.RefLogProbsName, trainapi.RefLogProbsInput{Store: e.Store, Run: "r", Phase: kind + "-pre", Reference: from, Data: prefTestData(),
			Kind: kind, Seq: 16, Seed: 5}, &ro)
		pre := chunk(e, kind+"-pre", from, 0, 1, 2, data.Cursor{Seed: 5}, kind, ro.RefData, "")
		fly := chunk(e, kind+"-fly", from, 0, 1, 2, data.Cursor{Seed: 5}, kind, "", from)
		if math.Abs(pre.Loss-fly.Loss) > 1e-5 || math.Abs(pre.Metrics["rewards/chosen"]-fly.Metrics["rewards/chosen"]) > 1e-5 {
			t.Errorf("%s: precomputed loss %v (chosen %v), on the fly %v (chosen %v)", kind, pre.Loss, pre.Metrics["rewards/chosen"],
				fly.Loss, fly.Metrics["rewards/chosen"])
		}
		// Policy = reference at the first step: the implicit rewards are 0 and the DPO loss is log 2.
		if kind == losscfg.PrefDPO && (math.Abs(pre.Loss-math.Ln2) > 1e-5 || math.Abs(pre.Metrics["rewards/margin"]) > 1e-6) {
			t.Errorf("dpo first step: loss %v (want log 2), margin %v (want 0)", pre.Loss, pre.Metrics["rewards/margin"])
		}
	}
}

// TestPrefEvaluate: against itself a checkpoint has zero implicit rewards and KL; after DPO training on
// the same task, the held-out reward margin and the KL are positive.
func TestPrefEvaluate(t *testing.T) {
	e := traintest.New(t)
	from := start(e, 6)
	eval := func(uri string) map[string]float64 {
		var out trainapi.EvalOutput
		e.Must(trainapi.PrefEvaluateName, trainapi.PrefEvalInput{Store: e.Store, Checkpoint: uri, Reference: from, Data: prefTestData(),
			Loss: losscfg.DefaultPreference(losscfg.PrefDPO), KLTokens: 4, Seed: 5}, &out)
		return out.Metrics
	}
	m := eval(from)
	for _, k := range []string{"heldout_reward_margin", "heldout_reward_chosen", "heldout_kl_ref", "heldout_kl_sampled"} {
		if v, ok := m[k]; !ok || v != 0 {
			t.Errorf("self-evaluation: %s = %v (present %t), want exactly 0", k, v, ok)
		}
	}
	if m["heldout_pairs"] != 16 || m["heldout_pref_accuracy"] < 0 || m["heldout_pref_accuracy"] > 1 {
		t.Fatalf("metrics %v", m)
	}
	out := chunk(e, "dpo", from, 0, 6, 6, data.Cursor{Seed: 5}, losscfg.PrefDPO, "", from)
	after := eval(out.Checkpoint)
	t.Logf("before %v\nafter %v", m, after)
	if !(after["heldout_reward_margin"] > 0) || !(after["heldout_kl_sampled"] != 0) {
		t.Errorf("after dpo: margin %v, sampled KL %v; want a positive margin and a non-zero KL", after["heldout_reward_margin"], after["heldout_kl_sampled"])
	}
	if after["heldout_logp_chosen"]-after["heldout_logp_rejected"] <= m["heldout_logp_chosen"]-m["heldout_logp_rejected"] {
		t.Errorf("dpo did not widen log π(chosen) − log π(rejected): %v → %v", m["heldout_logp_chosen"]-m["heldout_logp_rejected"],
			after["heldout_logp_chosen"]-after["heldout_logp_rejected"])
	}
}

// TestPreferencesFromModel: pairs made from a model's samples are verified (chosen passes the task's
// checker, rejected fails), and a retry returns the same object.
func TestPreferencesFromModel(t *testing.T) {
	e := traintest.New(t)
	from := start(e, 7)
	in := trainapi.PrefFromModelInput{Store: e.Store, Run: "r", Phase: "dpo", Checkpoint: from, Data: prefTestData(),
		Sampling: trainapi.PrefSampling{Prompts: 12, Samples: 4, MaxNewTokens: 4}, Seed: 5}
	var out trainapi.PrefFromModelOutput
	e.Must(trainapi.PreferencesFromModelName, in, &out)
	if out.Pairs == 0 || out.Prompts != 12 || out.Pairs+out.AllCorrect > 12 {
		t.Fatalf("%+v", out)
	}
	pairs, err := train.ReadLines(context.Background(), ckpt.New(ckpt.Options{}), out.Train, tasks.ReadPrefAll)
	if err != nil {
		t.Fatal(err)
	}
	held, err := train.ReadLines(context.Background(), ckpt.New(ckpt.Options{}), out.Heldout, tasks.ReadPrefAll)
	if err != nil || len(held) != out.HeldoutPairs || len(held) == 0 {
		t.Fatalf("held-out pairs: %d read (%v), %d reported", len(held), err, out.HeldoutPairs)
	}
	trainPrompts := map[string]bool{}
	for _, p := range pairs {
		trainPrompts[p.Prompt] = true
	}
	for _, p := range held {
		if trainPrompts[p.Prompt] {
			t.Errorf("held-out prompt %q is also a training prompt", p.Prompt)
		}
	}
	pairs = append(pairs, held...)
	task, _ := tasks.Lookup("add2")
	for _, p := range pairs {
		ex := p.AsExample(p.Chosen)
		if ok, _ := task.Check(ex, p.Chosen); !ok {
			t.Errorf("chosen %q fails for %q", p.Chosen, p.Prompt)
		}
		if ok, _ := task.Check(ex, p.Rejected); ok {
			t.Errorf("rejected %q passes for %q", p.Rejected, p.Prompt)
		}
	}
	var again trainapi.PrefFromModelOutput
	e.Must(trainapi.PreferencesFromModelName, in, &again)
	if !again.Resumed || again.Train != out.Train || again.Heldout != out.Heldout || again.Pairs != out.Pairs {
		t.Fatalf("retry: %+v, want %+v", again, out)
	}
}

// TestPrefDataErrors: malformed data is a non-retryable error naming file and line; a kind that needs
// pairs refuses unpaired lines; a sequence longer than batch.seq names the example.
func TestPrefDataErrors(t *testing.T) {
	e := traintest.New(t)
	from := start(e, 8)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return "file://" + p
	}
	good := `{"prompt":"1+1=","chosen":"2","rejected":"3"}` + "\n"
	cases := []struct {
		name, body, kind, want string
		seq                    int
	}{
		{"typo.jsonl", good + `{"prompt":"1+2=","chosen":"3","rejectd":"4"}` + "\n", losscfg.PrefDPO, `typo.jsonl:2: unknown field "rejectd"; did you mean "rejected"?`, 16},
		{"half.jsonl", good + good + `{"prompt":"1+2=","chosen":"3"}` + "\n", losscfg.PrefDPO, `half.jsonl:3: a pair needs both "chosen" and "rejected"`, 16},
		{"unpaired.jsonl", good + `{"prompt":"1+2=","completion":"3","label":true}` + "\n", losscfg.PrefDPO, `example 2 ("") is unpaired`, 16},
		{"long.jsonl", good, losscfg.PrefDPO, `has 7 tokens, more than batch.seq 6`, 6},
	}
	for _, c := range cases {
		var out trainapi.ChunkOutput
		err := e.Run(trainapi.PrefChunkName, trainapi.PrefChunkInput{ChunkHead: trainapi.ChunkHead{Store: e.Store, Run: "r", Phase: "bad-" + c.name, From: from, Steps: 1, TotalSteps: 1, Cursor: data.Cursor{Seed: 1}, Optim: prefTestOptim(), FreshOptimizer: true},
			Data: trainapi.PrefDataSpec{Train: write(c.name, c.body)}, Reference: from, Batch: trainapi.BatchSpec{Rows: 2, Seq: c.seq}, Loss: losscfg.DefaultPreference(c.kind)}, &out)
		var app *temporal.ApplicationError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &app) || !app.NonRetryable() {
			t.Errorf("%s: got %v, want a non-retryable error containing %q", c.name, err, c.want)
		}
	}
	// kto accepts unpaired lines (and pairs, which it splits).
	var out trainapi.ChunkOutput
	e.Must(trainapi.PrefChunkName, trainapi.PrefChunkInput{ChunkHead: trainapi.ChunkHead{Store: e.Store, Run: "r", Phase: "kto-file", From: from, Steps: 1, TotalSteps: 1, Cursor: data.Cursor{Seed: 1}, Optim: prefTestOptim(), FreshOptimizer: true},
		Data: trainapi.PrefDataSpec{Train: write("kto.jsonl", good+`{"prompt":"1+2=","completion":"3","label":true}`+"\n")}, Reference: from, Batch: trainapi.BatchSpec{Rows: 2, Seq: 16}, Loss: losscfg.DefaultPreference(losscfg.PrefKTO)}, &out)
}
