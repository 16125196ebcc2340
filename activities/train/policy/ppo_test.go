package policy_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/workers/traintest"
)

// ppoToyRollouts samples n completions of up to two tokens from the policy checkpoint for one prompt
// and scores them on the toy task "the first completion byte is even" (about half of a fresh model's
// samples). It writes the rollouts file and returns its URI, the rewards and their mean.
func ppoToyRollouts(t *testing.T, policy, dir string, iter, n int) (string, []float64, float64) {
	t.Helper()
	ctx := context.Background()
	m, err := train.Loader{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: traintest.NewEngine}.Load(ctx, policy, train.LoadOptions{})
	if err != nil {
		t.Fatalf("load policy %s: %v", policy, err)
	}
	eng := m.Engine
	defer eng.Close()
	prompt := []int{tokenize.ByteBOS, 'q', '='}
	prompts := make([][]int, n)
	for i := range prompts {
		prompts[i] = prompt
	}
	cs, err := eng.Generate(prompts, sample.Options{MaxNewTokens: 2, Temperature: 1, Seed: uint64(1000 + iter),
		StopTokens: []int{tokenize.ByteEOS}})
	if err != nil {
		t.Fatal(err)
	}
	rs := make([]rollout.Rollout, n)
	rewards := make([]float64, n)
	var sum float64
	for i, c := range cs {
		rs[i] = rollout.Rollout{ID: fmt.Sprintf("r%d", i), Group: i / 4, PromptTokens: prompt, Tokens: c.Tokens, LogProbs: c.LogProbs}
		if len(c.Tokens) > 0 && c.Tokens[0]%2 == 0 {
			rewards[i] = 1
		}
		sum += rewards[i]
	}
	return writeRollouts(t, dir, fmt.Sprintf("%03d", iter), rs), rewards, sum / float64(n)
}

// TestPPOStepLearnsToyTask runs PPO iterations of the trainer activity on a toy task from a fresh
// tiny model: the first step adds a seeded value head; every checkpoint keeps the causal LM in
// model.safetensors (loadable by rollout and evaluation as before) and the critic in
// critic.safetensors; the critic's fit improves (value loss falls) and the policy's reward rises.
// A retried step returns the committed version; an engine that cannot read values is a
// non-retryable error.
func TestPPOStepLearnsToyTask(t *testing.T) {
	e := traintest.New(t)
	var init trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "ppo", Phase: "sft", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 11}, &init)

	dir := t.TempDir()
	const iters, n = 8, 64
	lc := losscfg.DefaultPolicyConfig(losscfg.AlgoPPO)
	policy := init.Checkpoint
	var first, last trainapi.PolicyStepOutput
	var in trainapi.PolicyStepInput
	_, _, before := ppoToyRollouts(t, policy, dir, 999, 128)
	for k := range iters {
		uri, rewards, mean := ppoToyRollouts(t, policy, dir, k, n)
		in = trainapi.PolicyStepInput{Store: e.Store, Run: "ppo", Phase: "ppo", Policy: policy, Reference: init.Checkpoint, Version: k,
			Rollouts: uri, Rewards: rewards, Loss: lc, LR: 3e-3, Epochs: 2, Minibatch: 32, FreshOptimizer: k == 0,
			Optim: trainapi.Optim{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1},
			PPO:   &trainapi.PPOConfig{Gamma: 1, Lambda: 0.95, Seed: 5}}
		var out trainapi.PolicyStepOutput
		e.Must(trainapi.PolicyStepName, in, &out)
		m := out.Metrics
		t.Logf("v%d reward %.3f value_loss %.4f value_mean %.3f entropy %.3f clip_frac %.3f ev %.3f", k, mean,
			m["value_loss"], m["value_mean"], m["entropy"], m["clip_frac"], m["explained_variance"])
		for _, name := range []string{"value_loss", "value_clip_frac", "entropy", "clip_frac", "pg_loss", "loss", "grad_norm", "return_mean"} {
			if v, ok := m[name]; !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("v%d: metric %s = %v (present %v): want a finite value", k, name, v, ok)
			}
		}
		if out.NonFinite || out.Version != k+1 || m["optimizer_steps"] != 4 {
			t.Fatalf("v%d: %+v", k, out)
		}
		want := 0.0
		if k == 0 {
			want = 1
		}
		if m["new_value_head"] != want {
			t.Fatalf("v%d: new_value_head %v, want %v (a head is added to the SFT checkpoint only)", k, m["new_value_head"], want)
		}
		if k == 0 {
			first = out
		}
		last, policy = out, out.Checkpoint
	}
	_, _, after := ppoToyRollouts(t, policy, dir, 998, 128)
	t.Logf("reward %.3f → %.3f; value_loss %.4f → %.4f", before, after, first.Metrics["value_loss"], last.Metrics["value_loss"])
	if !(after >= before+0.2) {
		t.Errorf("PPO did not raise the toy reward: %.3f → %.3f", before, after)
	}
	if !(last.Metrics["value_loss"] < first.Metrics["value_loss"]) {
		t.Errorf("the critic did not improve: value_loss %.4f → %.4f", first.Metrics["value_loss"], last.Metrics["value_loss"])
	}

	// The checkpoint: a plain causal LM in model.safetensors, the value head in critic.safetensors.
	if w := traintest.WeightsOf(t, policy); w["score.weight"] != nil || w["model.embed_tokens.weight"] == nil {
		t.Fatalf("model.safetensors should hold the causal LM only: score.weight present %v", w["score.weight"] != nil)
	}
	ck, err := ckpt.New(ckpt.Options{}).Read(context.Background(), policy)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ck.Open(context.Background(), trainapi.CriticFile)
	if err != nil {
		t.Fatalf("critic file: %v", err)
	}
	cf, err := safetensors.Read(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if tw, ok := cf.Tensor("score.weight"); !ok || len(tw.Shape) != 2 || tw.Shape[1] != traintest.TinyModel(t).DModel {
		t.Fatalf("critic file: score.weight %v", tw.Shape)
	}

	// A retried step finds its committed version.
	var again trainapi.PolicyStepOutput
	e.Must(trainapi.PolicyStepName, in, &again)
	if !again.Resumed || again.Checkpoint != last.Checkpoint {
		t.Fatalf("retry: %+v, want the committed %s", again, last.Checkpoint)
	}

	// An engine without per-token values cannot train PPO.
	e.Deps.NewEngine = func(o train.EngineOptions) (train.Engine, error) {
		eng, err := traintest.NewEngine(o)
		return noValues{eng}, err
	}
	in.Version, in.Phase = 0, "ppo-novalues"
	err = e.Run(trainapi.PolicyStepName, in, &again)
	var ae *temporal.ApplicationError
	if err == nil || !errors.As(err, &ae) || !ae.NonRetryable() || !strings.Contains(err.Error(), "ValueReader") {
		t.Fatalf("engine without values: %v", err)
	}
}

// TestPPOStepTrainsAgentSegments: a PPO step over agent episodes whose calls did not extend one
// context (rollout.Segments) trains every further segment as a row of its own, the critic's too
// (its GAE joins an episode's rows, TestPPOAdvantagesOverSegments), even where a minibatch ends
// between an episode's rows; it once refused them with a non-retryable error after validation had
// accepted the phase.
func TestPPOStepTrainsAgentSegments(t *testing.T) {
	e := traintest.New(t)
	var init trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "ppo-seg", Phase: "sft", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 11}, &init)
	dir := t.TempDir()
	const n = 16
	uri, rewards, _ := ppoToyRollouts(t, init.Checkpoint, dir, 0, n)
	rs, err := train.ReadRollouts(context.Background(), ckpt.New(ckpt.Options{}), uri)
	if err != nil {
		t.Fatal(err)
	}
	segs := 0
	for i := range rs {
		if i%4 == 2 && len(rs[i].Tokens) > 0 { // one further segment under another prompt
			r := rs[i]
			pt := make([]bool, len(r.Tokens))
			for k := range pt {
				pt[k] = k != 1 // a tool's token in the segment: not trained
			}
			rs[i].Segments = []rollout.Segment{{PromptTokens: []int{tokenize.ByteBOS, 'r', '='}, Tokens: r.Tokens, LogProbs: r.LogProbs, Policy: pt}}
			segs++
		}
	}
	if segs < 2 {
		t.Fatalf("%d episodes with segments: the case needs a minibatch that ends between an episode's rows", segs)
	}
	in := trainapi.PolicyStepInput{Store: e.Store, Run: "ppo-seg", Phase: "ppo", Policy: init.Checkpoint, Reference: init.Checkpoint,
		Rollouts: writeRollouts(t, dir, "agent", rs), Rewards: rewards, Loss: losscfg.DefaultPolicyConfig(losscfg.AlgoPPO), LR: 3e-3,
		Epochs: 1, Minibatch: 8, FreshOptimizer: true, Optim: trainapi.Optim{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1},
		PPO: &trainapi.PPOConfig{Gamma: 1, Lambda: 0.95, Seed: 5}}
	var out trainapi.PolicyStepOutput
	e.Must(trainapi.PolicyStepName, in, &out)
	rows := n + segs
	if want := float64((rows + 7) / 8); out.NonFinite || out.Metrics["optimizer_steps"] != want {
		t.Fatalf("%d rows (%d segments): %v optimizer steps, want %v (non-finite %v)", rows, segs, out.Metrics["optimizer_steps"], want, out.NonFinite)
	}
	for _, name := range []string{"value_loss", "pg_loss", "return_mean", "explained_variance"} {
		if v, ok := out.Metrics[name]; !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("metric %s = %v (present %v): want a finite value", name, v, ok)
		}
	}
}

// TestPPOConfigValidate: every bad knob is named.
func TestPPOConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  trainapi.PPOConfig
		path string
	}{
		{trainapi.DefaultPPOConfig(), ""},
		{trainapi.PPOConfig{Gamma: 0.99, Lambda: 1, KLCoef: 0.05}, ""},
		{trainapi.PPOConfig{Gamma: 1.5, Lambda: 0.95}, "ppo.gamma"},
		{trainapi.PPOConfig{Gamma: math.NaN(), Lambda: 0.95}, "ppo.gamma"},
		{trainapi.PPOConfig{Gamma: 1, Lambda: -0.1}, "ppo.lambda"},
		{trainapi.PPOConfig{Gamma: 1, Lambda: 0.95, KLCoef: -1}, "ppo.kl_coef"},
		{trainapi.PPOConfig{Gamma: 1, Lambda: 0.95, KLCoef: math.Inf(1)}, "ppo.kl_coef"},
	} {
		err := c.cfg.Validate()
		if (err == nil) != (c.path == "") || (err != nil && !strings.Contains(err.Error(), c.path)) {
			t.Errorf("%+v: error %v, want one naming %q", c.cfg, err, c.path)
		}
	}
}

// noValues is an engine that cannot read a value head: its Caps offer none.
type noValues struct{ train.Engine }

func (e noValues) Caps() train.Caps {
	c := e.Engine.Caps()
	c.Values = nil
	return c
}
