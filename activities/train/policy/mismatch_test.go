package policy_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/workers/traintest"
)

// TestPolicyStepMismatch: the policy step reports the train–inference mismatch of its rollouts, over
// all of them and split into fresh (sampled by the version it trains) and stale ones, the same
// whether its one on-policy step measures it in the graph or a step of two minibatches measures it
// on the host. The rollouts come from the engine's own sampler, and the stale half's behaviour
// log-probs are shifted by −0.7 (a ratio of e^0.7 ≈ 2.01, just outside [0.5, 2]), so each half's
// figures are known: the fresh half's are the engine's own mismatch (sampling vs the trainer's
// forward: small), the stale half's 0.7 per token.
func TestPolicyStepMismatch(t *testing.T) {
	const shift, version = 0.7, 1
	e := traintest.New(t)
	var init trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "mm", Phase: "sft", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 11}, &init)
	dir := t.TempDir()
	uri, rewards, _ := ppoToyRollouts(t, init.Checkpoint, dir, 0, 16)
	rs := readRollouts(t, uri)
	for i := range rs {
		rs[i].PolicyVersion = version
		if i%2 == 1 {
			rs[i].PolicyVersion = version - 1
			for k := range rs[i].LogProbs {
				rs[i].LogProbs[k] -= shift
			}
		}
	}
	allFresh := make([]rollout.Rollout, len(rs))
	for i, r := range rs {
		r.PolicyVersion = version
		allFresh[i] = r
	}
	lc := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
	lc.KLBeta = 0
	step := func(phase string, rs []rollout.Rollout, minibatch int) map[string]float64 {
		in := trainapi.PolicyStepInput{Store: e.Store, Run: "mm", Phase: phase, Policy: init.Checkpoint, Version: version,
			Rollouts: writeRollouts(t, dir, phase, rs), Rewards: rewards, Loss: lc, Minibatch: minibatch, FreshOptimizer: true,
			Optim: trainapi.Optim{LR: 1e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}}
		var out trainapi.PolicyStepOutput
		e.Must(trainapi.PolicyStepName, in, &out)
		return out.Metrics
	}
	const all, fresh, stale = loss.MismatchPrefix, "mismatch_fresh_", "mismatch_stale_"
	get := func(m map[string]float64, prefix, k string) float64 {
		v, ok := m[prefix+k]
		if !ok {
			t.Fatalf("no metric %s%s in %v", prefix, k, m)
		}
		return v
	}
	onPolicy := step("onpolicy", allFresh, 0)   // one step: measured in the graph
	split := step("minibatches", rs, len(rs)/2) // two steps: measured on the host
	t.Logf("fresh (engine sampler vs trainer): abs_mean %.3g abs_max %.3g k3 %.3g over %v tokens", get(split, fresh, loss.MismatchAbsMean),
		get(split, fresh, loss.MismatchAbsMax), get(split, fresh, loss.MismatchK3), get(split, fresh, loss.MismatchTokens))
	tokens := get(onPolicy, all, loss.MismatchTokens)
	if tokens < float64(len(rs)) {
		t.Fatalf("%v tokens for %d rollouts", tokens, len(rs))
	}
	for _, c := range []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"tokens (host vs graph)", get(split, all, loss.MismatchTokens), tokens, 0},
		{"abs_mean (host vs graph)", get(split, all, loss.MismatchAbsMean), get(onPolicy, all, loss.MismatchAbsMean), 1e-4},
		{"abs_max (host vs graph)", get(split, all, loss.MismatchAbsMax), get(onPolicy, all, loss.MismatchAbsMax), 1e-4},
		{"k3 (host vs graph)", get(split, all, loss.MismatchK3), get(onPolicy, all, loss.MismatchK3), 1e-4},
		{"out_frac (host vs graph)", get(split, all, loss.MismatchOutFrac), get(onPolicy, all, loss.MismatchOutFrac), 1e-9},
		{"fresh+stale tokens", get(split, fresh, loss.MismatchTokens) + get(split, stale, loss.MismatchTokens), tokens, 0},
		{"stale abs_mean", get(split, stale, loss.MismatchAbsMean), shift, 1e-2},
		{"stale abs_max", get(split, stale, loss.MismatchAbsMax), shift, 1e-2},
		{"stale out_frac", get(split, stale, loss.MismatchOutFrac), 1, 0},
		{"fresh abs_max", get(split, fresh, loss.MismatchAbsMax), 0, 1e-2},
		{"fresh out_frac", get(split, fresh, loss.MismatchOutFrac), 0, 0},
		{"all abs_max", get(split, all, loss.MismatchAbsMax), math.Max(get(split, fresh, loss.MismatchAbsMax), get(split, stale, loss.MismatchAbsMax)), 0},
		{"all abs_mean (token-weighted)", get(split, all, loss.MismatchAbsMean),
			(get(split, fresh, loss.MismatchAbsMean)*get(split, fresh, loss.MismatchTokens) +
				get(split, stale, loss.MismatchAbsMean)*get(split, stale, loss.MismatchTokens)) / tokens, 1e-9},
	} {
		if math.Abs(c.got-c.want) > c.tol {
			t.Errorf("%s = %.6g, want %.6g (±%g)", c.name, c.got, c.want, c.tol)
		}
	}
	// The on-policy step's rollouts are all fresh: its figures are the fresh ones, and none is stale.
	for _, k := range loss.MismatchNames("") {
		if get(onPolicy, fresh, k) != get(onPolicy, all, k) {
			t.Errorf("on-policy %s%s = %v, %s%s = %v", fresh, k, onPolicy[fresh+k], all, k, onPolicy[all+k])
		}
	}
	for k := range onPolicy {
		if strings.HasPrefix(k, stale) {
			t.Errorf("on-policy step with fresh rollouts reports %s", k)
		}
	}
}

func readRollouts(t *testing.T, uri string) []rollout.Rollout {
	t.Helper()
	f, err := os.Open(strings.TrimPrefix(uri, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := rollout.Read(f, uri)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// writeRollouts writes rs into dir as rollouts-NAME.jsonl and returns its file:// URI.
func writeRollouts(t *testing.T, dir, name string, rs []rollout.Rollout) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("rollouts-%s.jsonl", name))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := rollout.Write(f, rs); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return "file://" + path
}
