package reward

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/lm"
	"github.com/temperml/temper/activities/train/rewardmodel"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/tpu"
)

// criticEngine adapts *tpu.Runtime to train.Engine as workers/engine.go does (tests may import tpu).
type criticEngine struct {
	rt     *tpu.Runtime
	closed *int
	mu     *sync.Mutex
}

func (e criticEngine) LoadWeights(r io.Reader) error   { return e.rt.LoadWeights(r) }
func (e criticEngine) SaveWeights(w io.Writer) error   { return e.rt.SaveWeights(w, safetensors.F32) }
func (e criticEngine) LoadOptimizer(r io.Reader) error { return e.rt.LoadOptimizer(r) }
func (e criticEngine) SaveOptimizer(w io.Writer) error { return e.rt.SaveOptimizer(w) }
func (e criticEngine) Close() error {
	e.mu.Lock()
	*e.closed++
	e.mu.Unlock()
	return e.rt.Close()
}
func (e criticEngine) TrainStep(b data.TokenBatch, lr float32) (train.StepMetrics, error) {
	m, err := e.rt.TrainStep(b, lr)
	return train.StepMetrics(m), err
}
func (e criticEngine) EvalLoss(b data.TokenBatch) (train.StepMetrics, error) {
	m, err := e.rt.EvalLoss(b)
	return train.StepMetrics(m), err
}
func (e criticEngine) Generate(p [][]int, o sample.Options) ([]model.Completion, error) {
	return e.rt.Generate(p, o)
}
func (e criticEngine) LogProbs(b data.TokenBatch) ([][]float32, error) {
	return e.rt.LogProbs(b)
}
func (e criticEngine) StepObjective(obj objective.Objective, b objective.Batch, lr float32) (map[string]float32, error) {
	return e.rt.StepObjective(obj, b, lr)
}
func (e criticEngine) EvalObjective(obj objective.Objective, b objective.Batch) (map[string]float32, error) {
	return e.rt.EvalObjective(obj, b)
}
func (e criticEngine) Caps() train.Caps { return train.Caps{} }

// engineCounter builds tpu engines and counts how many were made and closed.
type engineCounter struct {
	mu           sync.Mutex
	made, closed int
}

func (c *engineCounter) new(o train.EngineOptions) (train.Engine, error) {
	rt, err := tpu.New(tpu.Options{Model: o.Model, Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.made++
	c.mu.Unlock()
	return criticEngine{rt: rt, closed: &c.closed, mu: &c.mu}, nil
}

// rewardModels commits reward models (fresh tiny models with value heads) and one causal LM.
func rewardModels(t *testing.T, seeds ...uint64) (rms []string, causal string) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	ec := &engineCounter{}
	deps := &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: ec.new}
	lm.Register(env, deps)
	rewardmodel.Register(env, deps)
	store := "file://" + t.TempDir()
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxSeq = 32
	for i, s := range seeds {
		v, err := env.ExecuteActivity(trainapi.RewardInitName, trainapi.RewardInitInput{Store: store, Run: "c", Phase: fmt.Sprintf("rm%d", i), Model: modelcfg.Config(cfg), Seed: s,
			LogProb: i == 1}) // the second with the generative term: the critic must score it as the reward phase does
		if err != nil {
			t.Fatal(err)
		}
		var out trainapi.RewardInitOutput
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		rms = append(rms, out.Checkpoint)
	}
	v, err := env.ExecuteActivity(trainapi.InitName, trainapi.InitInput{Store: store, Run: "c", Phase: "lm", Model: modelcfg.Config(cfg), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out trainapi.InitOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return rms, out.Checkpoint
}

func criticParams(uri string, threshold float64) json.RawMessage {
	b, _ := json.Marshal(CriticParams{Checkpoint: uri, Threshold: threshold})
	return b
}

// TestCriticScoresWithTheRewardModel: the critic's score is sigmoid of the reward the model gives
// prompt+completion at its EOS, its threshold decides pass, and it works through reward.Score.
func TestCriticScoresWithTheRewardModel(t *testing.T) {
	rms, lm := rewardModels(t, 1, 2, 3)
	ec := &engineCounter{}
	cl := ckpt.New(ckpt.Options{})
	f := NewCriticFactory(cl, ec.new)
	ctx := context.Background()

	// The reference: the reward model's value at the EOS of [BOS] prompt completion EOS (plus α times
	// the completion's log-likelihood for rms[1], which has the generative term), compared as
	// rewards (the logit of the score) since the second one's are far from 0.
	samples := []verify.Sample{{Prompt: "12+34=", Completion: "46"}, {Prompt: "12+34=", Completion: "47"}, {Completion: "no prompt"}}
	for k, uri := range rms[:2] {
		ld, err := train.Loader{Ckpt: cl, NewEngine: (&engineCounter{}).new}.Load(ctx, uri, train.LoadOptions{Head: train.HeadRequired})
		if err != nil {
			t.Fatal(err)
		}
		eng, cfg := ld.Engine, ld.Config
		if cfg.RewardLogProb != (k == 1) {
			t.Fatalf("%s: reward_logprob %v", uri, cfg.RewardLogProb)
		}
		crit, err := f(criticParams(uri, 0))
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range samples {
			ex := fmt.Sprintf("%s%s", s.Prompt, s.Completion)
			ids := append(append([]int{257}, bytesOf(ex)...), 258)
			completion := make([]bool, len(ids))
			for t := 1 + len(s.Prompt); t < len(ids); t++ {
				completion[t] = true
			}
			obj := objective.RewardScores(1)
			out, err := eng.EvalObjective(obj, train.SequenceInputs([][]int{ids}, [][]bool{completion}, 1, cfg.MaxSeq))
			if err != nil {
				t.Fatal(err)
			}
			want := float64(out[obj.Metrics[0]])
			v, err := crit.Verify(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := math.Log(v.Score) - math.Log1p(-v.Score); math.Abs(got-want) > 1e-4*math.Max(1, math.Abs(want)) || v.Pass != (v.Score >= 0.5) {
				t.Errorf("%s sample %d: verdict %+v (reward %.6f), want reward %.6f", uri, i, v, got, want)
			}
		}
		eng.Close()
	}
	lo, err := f(criticParams(rms[0], 0))
	if err != nil {
		t.Fatal(err)
	}
	// Thresholds: everything passes a tiny one and fails a huge one, with feedback.
	easy, _ := f(criticParams(rms[0], 1e-6))
	hard, _ := f(criticParams(rms[0], 0.999999))
	for _, s := range samples {
		if v, _ := easy.Verify(ctx, s); !v.Pass || v.Feedback != "" {
			t.Errorf("threshold 1e-6: %+v", v)
		}
		if v, _ := hard.Verify(ctx, s); v.Pass || !strings.Contains(v.Feedback, "learned critic") {
			t.Errorf("threshold 0.999999: %+v", v)
		}
	}
	// Too long for the model's context: a failing verdict, not an error.
	if v, err := lo.Verify(ctx, verify.Sample{Prompt: "1+1=", Completion: strings.Repeat("9", 40)}); err != nil || v.Pass || !strings.Contains(v.Feedback, "too long") {
		t.Errorf("long sample: %+v %v", v, err)
	}
	// One engine so far, shared by the three verifiers of the same checkpoint.
	if ec.made != 2 {
		t.Errorf("%d engines made for two checkpoints", ec.made)
	}
	// Through reward.Score, concurrently, with two other checkpoints: at most MaxCriticModels stay
	// loaded (the least recently used is closed), and every item is judged.
	acts := NewActivities(nil)
	if err := acts.Registry().Register(CriticVerifier, f); err != nil {
		t.Fatal(err)
	}
	var items []rewardapi.Item
	for i := 0; i < 12; i++ {
		items = append(items, rewardapi.Item{ID: fmt.Sprint(i), Prompt: fmt.Sprintf("%d+1=", i), Completion: fmt.Sprint(i + 1)})
	}
	for _, uri := range rms {
		out, err := acts.ScoreItems(ctx, rewardapi.ScoreInput{Items: items, Workers: 4,
			Spec: verify.Spec{Verifiers: []verify.Component{{Name: CriticVerifier, Params: criticParams(uri, 0)}}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.Metrics.Judged != 12 || out.Metrics.Errors != 0 || !(out.Metrics.MeanScore > 0 && out.Metrics.MeanScore < 1) {
			t.Fatalf("score with %s: %+v", uri, out.Metrics)
		}
	}
	if ec.made != 3 || ec.closed != 1 {
		t.Errorf("engines made %d, closed %d; want 3 made and the least recently used closed", ec.made, ec.closed)
	}
	// A causal LM is no reward model: the item cannot be judged (an error naming why).
	bad, _ := f(criticParams(lm, 0))
	if _, err := bad.Verify(ctx, samples[0]); err == nil || !strings.Contains(err.Error(), "value head") {
		t.Errorf("critic on a causal LM: %v", err)
	}
}

func bytesOf(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

func TestCriticParams(t *testing.T) {
	f := NewCriticFactory(ckpt.New(ckpt.Options{}), (&engineCounter{}).new)
	for _, c := range []struct{ params, want string }{
		{`{"checkpoint":"file:///tmp/rm/step-000010/"}`, ""},
		{`{"checkpoint":"gs://b/rm/step-000010/","threshold":0.8}`, ""},
		{`{}`, "checkpoint"},
		{`{"checkpoint":"/tmp/rm"}`, "checkpoint"},
		{`{"checkpoint":"file:///tmp/rm","threshold":1}`, "threshold"},
		{`{"checkpoint":"file:///tmp/rm","threshold":-0.1}`, "threshold"},
		{`{"checkpoint":"file:///tmp/rm","treshold":0.5}`, "unknown field"},
	} {
		_, err := f(json.RawMessage(c.params))
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want an error containing %q", c.params, err, c.want)
		}
	}
	// Without an engine the params still validate (config checks), and use explains the problem.
	v, err := NewCriticFactory(nil, nil)(json.RawMessage(`{"checkpoint":"file:///x/"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), verify.Sample{Prompt: "1+1=", Completion: "2"}); err == nil || !strings.Contains(err.Error(), "no engine") {
		t.Errorf("without an engine: %v", err)
	}
}
