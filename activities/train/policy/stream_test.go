package policy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/workers/traintest"
)

// TestStreamedPolicyStepMatchesInMemory: a policy step given its rollouts by reference in shards,
// with minibatches, reads them from the store as it trains (stream.go) and commits the same weights,
// optimizer state and metrics as the in-memory step given the same rollouts inline, with the KL
// term's reference model and dynamic sampling on (rows skipped inside the stream). An agent's
// episodes whose calls did not extend one context (rollout.Segments) train each further segment as
// a row of its own right after its episode's, streamed as in memory, even where a minibatch ends
// between an episode's rows.
func TestStreamedPolicyStepMatchesInMemory(t *testing.T) {
	e := traintest.New(t)
	var pol, ref trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "s", Phase: "policy", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 11}, &pol)
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "s", Phase: "ref", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 12}, &ref)
	dir := t.TempDir()
	const n, groups = 48, 12
	uri, rewards, _ := ppoToyRollouts(t, pol.Checkpoint, dir, 0, n)
	plain, err := train.ReadRollouts(context.Background(), ckpt.New(ckpt.Options{}), uri)
	if err != nil {
		t.Fatal(err)
	}
	// The third sample of every group is an agent's episode with one further segment: a second
	// context under another prompt (as long as the first, so that both steps lay out rows alike).
	agent := make([]rollout.Rollout, n)
	for i, r := range plain {
		agent[i] = r
		if i%4 == 2 && len(r.Tokens) > 0 {
			pt := make([]bool, len(r.Tokens))
			for k := range pt {
				pt[k] = k != 1 // a tool's token in the segment: not trained
			}
			agent[i].Segments = []rollout.Segment{{PromptTokens: []int{tokenize.ByteBOS, 'r', '='}, Tokens: r.Tokens, LogProbs: r.LogProbs, Policy: pt}}
		}
	}
	cases := []struct {
		name      string
		rs        []rollout.Rollout
		minibatch int
		rowsGroup int // rows a kept group trains
	}{
		{"plain rollouts", plain, 12, 4},
		{"agent episodes with segments", agent, 12, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sub := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			all := writeRollouts(t, sub, "all", c.rs)
			var shards []trainapi.ScoredShard
			for s, r := range [][2]int{{0, 16}, {16, 24}, {24, 48}} { // at group boundaries (4 samples a group)
				var b bytes.Buffer
				if err := rollout.Write(&b, c.rs[r[0]:r[1]]); err != nil {
					t.Fatal(err)
				}
				var v strings.Builder
				for i := r[0]; i < r[1]; i++ {
					fmt.Fprintf(&v, `{"id":%q,"score":%g}`+"\n", c.rs[i].ID, rewards[i])
				}
				ro, vo := filepath.Join(sub, fmt.Sprintf("s%d.jsonl", s)), filepath.Join(sub, fmt.Sprintf("s%d.verdicts.jsonl", s))
				if os.WriteFile(ro, b.Bytes(), 0o644) != nil || os.WriteFile(vo, []byte(v.String()), 0o644) != nil {
					t.Fatal("write shards")
				}
				shards = append(shards, trainapi.ScoredShard{Rollouts: "file://" + ro, Verdicts: "file://" + vo})
			}
			lc := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
			lc.KLBeta = 0.05
			in := trainapi.PolicyStepInput{Store: e.Store, Run: "s", Policy: pol.Checkpoint, Reference: ref.Checkpoint, Loss: lc, LR: 3e-3,
				Epochs: 2, Minibatch: c.minibatch, DynamicSampling: true, FreshOptimizer: true,
				Optim: trainapi.Optim{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}}
			inline, sharded := in, in
			phase := strings.ReplaceAll(c.name, " ", "-")
			inline.Phase, inline.Rollouts, inline.Rewards = phase+"-inline", all, rewards
			sharded.Phase, sharded.Shards = phase+"-sharded", shards
			var a, b trainapi.PolicyStepOutput
			e.Must(trainapi.PolicyStepName, inline, &a)
			e.Must(trainapi.PolicyStepName, sharded, &b)
			rows := c.rowsGroup * (groups - int(a.Metrics["groups_dropped"]))
			if want := float64(2 * ((rows + c.minibatch - 1) / c.minibatch)); rows == 0 || a.Metrics["optimizer_steps"] != want { // 2 epochs
				t.Fatalf("in-memory step: %v optimizer steps over %d rows, want %v: %v", a.Metrics["optimizer_steps"], rows, want, a.Metrics)
			}
			if c.rowsGroup == 5 { // a kept group's rows: samples 0 1 2, sample 2's segment, sample 3
				split := false
				for g := range groups - int(a.Metrics["groups_dropped"]) {
					split = split || (5*g+3)%c.minibatch == 0
				}
				if !split {
					t.Fatal("no minibatch starts at a segment's row: the case does not test a segment read after its episode's minibatch")
				}
			}
			for k, v := range a.Metrics {
				if k != "train_tokens_per_s" && !strings.HasPrefix(k, "seconds") && b.Metrics[k] != v { // wall times differ
					t.Errorf("metric %s: in memory %v, streamed %v", k, v, b.Metrics[k])
				}
			}
			for _, name := range []string{trainapi.ModelFile, trainapi.OptimizerFile} {
				if x, y := ckptBytes(t, a.Checkpoint, name), ckptBytes(t, b.Checkpoint, name); !bytes.Equal(x, y) {
					t.Errorf("%s differs between the in-memory and the streamed step", name)
				}
			}
			if bytes.Equal(ckptBytes(t, pol.Checkpoint, trainapi.ModelFile), ckptBytes(t, a.Checkpoint, trainapi.ModelFile)) {
				t.Fatal("the step did not change the weights: the comparison proves nothing")
			}
			t.Logf("in memory and streamed: %v optimizer steps, %v groups dropped, loss %v", a.Metrics["optimizer_steps"], a.Metrics["groups_dropped"], a.Metrics["loss"])
		})
	}
}

func ckptBytes(t *testing.T, uri, name string) []byte {
	t.Helper()
	ck, err := ckpt.New(ckpt.Options{}).Read(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ck.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
