package preference

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/core/tensors"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/activities/train/lm"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/tpu"
)

// prefTestEngine adapts *tpu.Runtime to train.Engine as workers/engine.go does (tests may import tpu; the
// package never does).
type prefTestEngine struct{ rt *tpu.Runtime }

func newPrefTestEngine(o train.EngineOptions) (train.Engine, error) {
	rt, err := tpu.New(tpu.Options{Model: o.Model, Seed: o.Seed,
		Optimizer: tpu.AdamW{Beta1: o.Optim.Beta1, Beta2: o.Optim.Beta2, Eps: o.Optim.Eps, WeightDecay: o.Optim.WeightDecay, ClipNorm: o.Optim.ClipNorm}})
	if err != nil {
		return nil, err
	}
	return prefTestEngine{rt}, nil
}

func (e prefTestEngine) LoadWeights(r io.Reader) error   { return e.rt.LoadWeights(r) }
func (e prefTestEngine) SaveWeights(w io.Writer) error   { return e.rt.SaveWeights(w, safetensors.F32) }
func (e prefTestEngine) LoadOptimizer(r io.Reader) error { return e.rt.LoadOptimizer(r) }
func (e prefTestEngine) SaveOptimizer(w io.Writer) error { return e.rt.SaveOptimizer(w) }
func (e prefTestEngine) Close() error                    { return e.rt.Close() }
func (e prefTestEngine) TrainStep(b train.Batch, lr float32) (train.StepMetrics, error) {
	m, err := e.rt.TrainStep(b, lr)
	return train.StepMetrics(m), err
}
func (e prefTestEngine) EvalLoss(b train.Batch) (train.StepMetrics, error) {
	m, err := e.rt.EvalLoss(b)
	return train.StepMetrics(m), err
}
func (e prefTestEngine) Generate(p [][]int, o sample.Options) ([]model.Completion, error) {
	return e.rt.Generate(p, o)
}
func (e prefTestEngine) LogProbs(b train.Batch) ([][]float32, error) {
	return e.rt.LogProbs(b)
}
func (e prefTestEngine) StepObjective(obj objective.Objective, in []*tensors.Tensor, lr float32) (map[string]float32, error) {
	return e.rt.StepObjective(obj, in, lr)
}
func (e prefTestEngine) EvalObjective(obj objective.Objective, in []*tensors.Tensor) (map[string]float32, error) {
	return e.rt.EvalObjective(obj, in)
}

// prefEnv runs the trainer's activities in Temporal's activity test environment (heartbeats work).
type prefEnv struct {
	t     *testing.T
	env   *testsuite.TestActivityEnvironment
	store string
}

func newPrefEnv(t *testing.T) *prefEnv {
	var ts testsuite.WorkflowTestSuite
	deps := &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: newPrefTestEngine}
	env := ts.NewTestActivityEnvironment()
	lm.Register(env, deps)
	Register(env, deps)
	env.SetTestTimeout(time.Hour)
	return &prefEnv{t: t, env: env, store: "file://" + t.TempDir()}
}

func (e *prefEnv) run(name string, in, out any) error {
	e.t.Helper()
	v, err := e.env.ExecuteActivity(name, in)
	if err != nil {
		return err
	}
	return v.Get(out)
}

func (e *prefEnv) must(name string, in, out any) {
	e.t.Helper()
	if err := e.run(name, in, out); err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
}

// start commits a seeded tiny model as the phase's starting checkpoint (a stand-in for an SFT model).
func (e *prefEnv) start(seed uint64) string {
	e.t.Helper()
	cfg, err := model.Preset("tiny")
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.MaxSeq = 64
	var out contract.InitOutput
	e.must(contract.InitName, contract.InitInput{Store: e.store, Run: "r", Phase: "sft", Model: modelcfg.Config(cfg), Seed: seed}, &out)
	return out.Checkpoint
}

func prefTestData() contract.PrefDataSpec {
	return contract.PrefDataSpec{Task: "add2", TrainExamples: 48, HeldoutExamples: 16}
}

func prefTestOptim() contract.Optim {
	return contract.Optim{LR: 3e-3, WarmupSteps: 1, MinLRRatio: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}
}

func (e *prefEnv) chunk(phase, from string, step, steps, total int, cur contract.Cursor, kind, refData, reference string) contract.ChunkOutput {
	e.t.Helper()
	var out contract.ChunkOutput
	e.must(contract.PrefChunkName, contract.PrefChunkInput{ChunkHead: contract.ChunkHead{Store: e.store, Run: "r", Phase: phase, From: from, Step: step, Steps: steps, TotalSteps: total, Cursor: cur, Optim: prefTestOptim(), FreshOptimizer: step == 0},
		Data: prefTestData(), RefData: refData, Reference: reference, Batch: contract.BatchSpec{Rows: 8, Seq: 16}, Loss: loss.DefaultPreference(kind)}, &out)
	return out
}

func fileSHA(t *testing.T, uri, name string) string {
	t.Helper()
	ck, err := ckpt.New(ckpt.Options{}).Read(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := ck.Manifest.File(name)
	if !ok {
		t.Fatalf("%s has no %s", uri, name)
	}
	return f.SHA256
}

// TestPrefChunkResumesBitIdentical: for dpo (precomputed reference) and kto (reference on the fly), a
// phase trained as one chunk of 4 steps and as two chunks of 2 ends with the same weights and optimizer
// state bit for bit; a retried chunk returns the committed one; training moves the implicit reward in
// the right direction (chosen up relative to rejected).
func TestPrefChunkResumesBitIdentical(t *testing.T) {
	e := newPrefEnv(t)
	from := e.start(3)
	for _, c := range []struct{ kind, mode string }{{loss.PrefDPO, contract.RefPrecomputed}, {loss.PrefKTO, contract.RefOnTheFly}, {loss.PrefSimPO, ""}} {
		t.Run(c.kind, func(t *testing.T) {
			refData, reference := "", ""
			switch c.mode {
			case contract.RefPrecomputed:
				var ro contract.RefLogProbsOutput
				e.must(contract.RefLogProbsName, contract.RefLogProbsInput{Store: e.store, Run: "r", Phase: c.kind + "-a", Reference: from, Data: prefTestData(),
					Kind: c.kind, Seq: 16, Seed: 5}, &ro)
				if ro.Examples != 48 || !strings.Contains(ro.RefData, "/runs/r/"+c.kind+"-a/ref/") {
					t.Fatalf("ref data: %+v", ro)
				}
				var again contract.RefLogProbsOutput
				e.must(contract.RefLogProbsName, contract.RefLogProbsInput{Store: e.store, Run: "r", Phase: c.kind + "-a", Reference: from, Data: prefTestData(),
					Kind: c.kind, Seq: 16, Seed: 5}, &again)
				if !again.Resumed || again.RefData != ro.RefData {
					t.Fatalf("retried RefLogProbs: %+v, want the object %s", again, ro.RefData)
				}
				refData = ro.RefData
			case contract.RefOnTheFly:
				reference = from
			}
			cur := contract.Cursor{Seed: 5}
			whole := e.chunk(c.kind+"-a", from, 0, 4, 4, cur, c.kind, refData, reference)
			h1 := e.chunk(c.kind+"-b", from, 0, 2, 4, cur, c.kind, refData, reference)
			h2 := e.chunk(c.kind+"-b", h1.Checkpoint, 2, 2, 4, h1.Cursor, c.kind, refData, reference)
			if whole.Step != 4 || h2.Step != 4 || whole.Cursor != h2.Cursor {
				t.Fatalf("steps %d/%d, cursors %+v/%+v", whole.Step, h2.Step, whole.Cursor, h2.Cursor)
			}
			for _, f := range []string{contract.ModelFile, contract.OptimizerFile} {
				if fileSHA(t, whole.Checkpoint, f) != fileSHA(t, h2.Checkpoint, f) {
					t.Errorf("%s differs between one chunk of 4 and two of 2", f)
				}
			}
			if math.Float64bits(whole.LastLoss) != math.Float64bits(h2.LastLoss) {
				t.Errorf("last loss %v vs %v", whole.LastLoss, h2.LastLoss)
			}
			again := e.chunk(c.kind+"-b", h1.Checkpoint, 2, 2, 4, h1.Cursor, c.kind, refData, reference)
			if !again.Resumed || again.Checkpoint != h2.Checkpoint || again.Loss != h2.Loss || again.Metrics["rewards/margin"] != h2.Metrics["rewards/margin"] {
				t.Fatalf("retried chunk: %+v, want the committed %+v", again, h2)
			}
			t.Logf("%s: loss %.4f → %.4f, metrics %v", c.kind, h1.Loss, h2.LastLoss, h2.Metrics)
			if c.kind == loss.PrefDPO && !(h2.Metrics["rewards/margin"] > 0) {
				t.Errorf("dpo: reward margin %v after 4 steps, want > 0", h2.Metrics["rewards/margin"])
			}
		})
	}
}

// TestPrefReferencePathsAgree: the first step's loss is the same with precomputed reference
// log-probs and with the reference scored on the fly.
func TestPrefReferencePathsAgree(t *testing.T) {
	e := newPrefEnv(t)
	from := e.start(4)
	for _, kind := range []string{loss.PrefDPO, loss.PrefIPO, loss.PrefKTO} {
		var ro contract.RefLogProbsOutput
		e.must(contract.RefLogProbsName, contract.RefLogProbsInput{Store: e.store, Run: "r", Phase: kind + "-pre", Reference: from, Data: prefTestData(),
			Kind: kind, Seq: 16, Seed: 5}, &ro)
		pre := e.chunk(kind+"-pre", from, 0, 1, 2, contract.Cursor{Seed: 5}, kind, ro.RefData, "")
		fly := e.chunk(kind+"-fly", from, 0, 1, 2, contract.Cursor{Seed: 5}, kind, "", from)
		if math.Abs(pre.Loss-fly.Loss) > 1e-5 || math.Abs(pre.Metrics["rewards/chosen"]-fly.Metrics["rewards/chosen"]) > 1e-5 {
			t.Errorf("%s: precomputed loss %v (chosen %v), on the fly %v (chosen %v)", kind, pre.Loss, pre.Metrics["rewards/chosen"],
				fly.Loss, fly.Metrics["rewards/chosen"])
		}
		// Policy = reference at the first step: the implicit rewards are 0 and the DPO loss is log 2.
		if kind == loss.PrefDPO && (math.Abs(pre.Loss-math.Ln2) > 1e-5 || math.Abs(pre.Metrics["rewards/margin"]) > 1e-6) {
			t.Errorf("dpo first step: loss %v (want log 2), margin %v (want 0)", pre.Loss, pre.Metrics["rewards/margin"])
		}
	}
}

// TestPrefEvaluate: against itself a checkpoint has zero implicit rewards and KL; after DPO training on
// the same task, the held-out reward margin and the KL are positive.
func TestPrefEvaluate(t *testing.T) {
	e := newPrefEnv(t)
	from := e.start(6)
	eval := func(uri string) map[string]float64 {
		var out contract.EvalOutput
		e.must(contract.PrefEvaluateName, contract.PrefEvalInput{Store: e.store, Checkpoint: uri, Reference: from, Data: prefTestData(),
			Loss: loss.DefaultPreference(loss.PrefDPO), KLTokens: 4, Seed: 5}, &out)
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
	out := e.chunk("dpo", from, 0, 6, 6, contract.Cursor{Seed: 5}, loss.PrefDPO, "", from)
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
	e := newPrefEnv(t)
	from := e.start(7)
	in := contract.PrefFromModelInput{Store: e.store, Run: "r", Phase: "dpo", Checkpoint: from, Data: prefTestData(),
		Sampling: contract.PrefSampling{Prompts: 12, Samples: 4, MaxNewTokens: 4}, Seed: 5}
	var out contract.PrefFromModelOutput
	e.must(contract.PreferencesFromModelName, in, &out)
	if out.Pairs == 0 || out.Prompts != 12 || out.Pairs+out.AllCorrect > 12 {
		t.Fatalf("%+v", out)
	}
	pairs, err := readPrefJSONL(context.Background(), ckpt.New(ckpt.Options{}), out.Train)
	if err != nil {
		t.Fatal(err)
	}
	held, err := readPrefJSONL(context.Background(), ckpt.New(ckpt.Options{}), out.Heldout)
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
	var again contract.PrefFromModelOutput
	e.must(contract.PreferencesFromModelName, in, &again)
	if !again.Resumed || again.Train != out.Train || again.Heldout != out.Heldout || again.Pairs != out.Pairs {
		t.Fatalf("retry: %+v, want %+v", again, out)
	}
}

// TestPrefDataErrors: malformed data is a non-retryable error naming file and line; a kind that needs
// pairs refuses unpaired lines; a sequence longer than batch.seq names the example.
func TestPrefDataErrors(t *testing.T) {
	e := newPrefEnv(t)
	from := e.start(8)
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
		{"typo.jsonl", good + `{"prompt":"1+2=","chosen":"3","rejectd":"4"}` + "\n", loss.PrefDPO, `typo.jsonl:2: unknown field "rejectd"; did you mean "rejected"?`, 16},
		{"half.jsonl", good + good + `{"prompt":"1+2=","chosen":"3"}` + "\n", loss.PrefDPO, `half.jsonl:3: a pair needs both "chosen" and "rejected"`, 16},
		{"unpaired.jsonl", good + `{"prompt":"1+2=","completion":"3","label":true}` + "\n", loss.PrefDPO, `example 2 ("") is unpaired`, 16},
		{"long.jsonl", good, loss.PrefDPO, `has 7 tokens, more than batch.seq 6`, 6},
	}
	for _, c := range cases {
		var out contract.ChunkOutput
		err := e.run(contract.PrefChunkName, contract.PrefChunkInput{ChunkHead: contract.ChunkHead{Store: e.store, Run: "r", Phase: "bad-" + c.name, From: from, Steps: 1, TotalSteps: 1, Cursor: contract.Cursor{Seed: 1}, Optim: prefTestOptim(), FreshOptimizer: true},
			Data: contract.PrefDataSpec{Train: write(c.name, c.body)}, Reference: from, Batch: contract.BatchSpec{Rows: 2, Seq: c.seq}, Loss: loss.DefaultPreference(c.kind)}, &out)
		var app *temporal.ApplicationError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &app) || !app.NonRetryable() {
			t.Errorf("%s: got %v, want a non-retryable error containing %q", c.name, err, c.want)
		}
	}
	// kto accepts unpaired lines (and pairs, which it splits).
	var out contract.ChunkOutput
	e.must(contract.PrefChunkName, contract.PrefChunkInput{ChunkHead: contract.ChunkHead{Store: e.store, Run: "r", Phase: "kto-file", From: from, Steps: 1, TotalSteps: 1, Cursor: contract.Cursor{Seed: 1}, Optim: prefTestOptim(), FreshOptimizer: true},
		Data: contract.PrefDataSpec{Train: write("kto.jsonl", good+`{"prompt":"1+2=","completion":"3","label":true}`+"\n")}, Reference: from, Batch: contract.BatchSpec{Rows: 2, Seq: 16}, Loss: loss.DefaultPreference(loss.PrefKTO)}, &out)
}

// TestNextRowsAndScatter checks the data order across epochs and the reference layout helpers.
func TestNextRowsAndScatter(t *testing.T) {
	seen := map[int]int{}
	cur := contract.Cursor{Seed: 9}
	for i := 0; i < 5; i++ {
		var idx []int
		idx, cur = train.NextRows(10, 4, cur)
		for _, j := range idx {
			seen[j]++
		}
	}
	if cur.Epoch != 2 || cur.Index != 0 {
		t.Fatalf("after 20 rows of 10: cursor %+v, want epoch 2 index 0", cur)
	}
	for j := 0; j < 10; j++ {
		if seen[j] != 2 {
			t.Fatalf("example %d seen %d times in two epochs", j, seen[j])
		}
	}
	enc := train.Encoder()
	e1, _ := enc.Encode(tasks.Example{Prompt: "1+2=", Completion: "3"})
	side := layoutSide([]data.Encoded{e1}, 8)
	// [BOS 1 + 2 = 3 EOS PAD]: the counted targets are "3" (after "=") and EOS.
	if want := []float32{0, 0, 0, 0, 1, 1, 0, 0}; !equalF32(side.mask[0], want) {
		t.Fatalf("mask %v, want %v", side.mask[0], want)
	}
	full, err := side.scatter([][]float32{{-1, -2}})
	if err != nil || !equalF32(full[0], []float32{0, 0, 0, 0, -1, -2, 0, 0}) {
		t.Fatalf("scatter: %v %v", full, err)
	}
	if _, err := side.scatter([][]float32{{-1}}); err == nil {
		t.Fatal("scatter of too few values: want an error")
	}
	if got := side.counted(full); !equalF32(got[0], []float32{-1, -2}) {
		t.Fatalf("counted %v", got)
	}
	b := side.batch()
	if b.Targets[0][3] != b.Tokens[0][4] || b.Targets[0][7] != 256 {
		t.Fatalf("targets %v for tokens %v", b.Targets[0], b.Tokens[0])
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
