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
	"github.com/temperml/temper/workers/traintest"
)

// TestStreamedPolicyStepMatchesInMemory: a policy step given its rollouts by reference in shards,
// with minibatches, reads them from the store as it trains (stream.go) and commits the same weights,
// optimizer state and metrics as the in-memory step given the same rollouts inline, with the KL
// term's reference model and dynamic sampling on (rows skipped inside the stream).
func TestStreamedPolicyStepMatchesInMemory(t *testing.T) {
	e := traintest.New(t)
	var pol, ref trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "s", Phase: "policy", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 11}, &pol)
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "s", Phase: "ref", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 12}, &ref)
	dir := t.TempDir()
	const n = 48
	uri, rewards, _ := ppoToyRollouts(t, pol.Checkpoint, dir, 0, n)
	rs, err := train.ReadRollouts(context.Background(), ckpt.New(ckpt.Options{}), uri)
	if err != nil {
		t.Fatal(err)
	}
	var shards []trainapi.ScoredShard
	for s, r := range [][2]int{{0, 16}, {16, 24}, {24, 48}} { // at group boundaries (4 samples a group)
		var b bytes.Buffer
		if err := rollout.Write(&b, rs[r[0]:r[1]]); err != nil {
			t.Fatal(err)
		}
		var v strings.Builder
		for i := r[0]; i < r[1]; i++ {
			fmt.Fprintf(&v, `{"id":%q,"score":%g}`+"\n", rs[i].ID, rewards[i])
		}
		ro, vo := filepath.Join(dir, fmt.Sprintf("s%d.jsonl", s)), filepath.Join(dir, fmt.Sprintf("s%d.verdicts.jsonl", s))
		if os.WriteFile(ro, b.Bytes(), 0o644) != nil || os.WriteFile(vo, []byte(v.String()), 0o644) != nil {
			t.Fatal("write shards")
		}
		shards = append(shards, trainapi.ScoredShard{Rollouts: "file://" + ro, Verdicts: "file://" + vo})
	}
	lc := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
	lc.KLBeta = 0.05
	in := trainapi.PolicyStepInput{Store: e.Store, Run: "s", Policy: pol.Checkpoint, Reference: ref.Checkpoint, Loss: lc, LR: 3e-3,
		Epochs: 2, Minibatch: 12, DynamicSampling: true, FreshOptimizer: true,
		Optim: trainapi.Optim{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}}
	inline, sharded := in, in
	inline.Phase, inline.Rollouts, inline.Rewards = "inline", uri, rewards
	sharded.Phase, sharded.Shards = "sharded", shards
	var a, b trainapi.PolicyStepOutput
	e.Must(trainapi.PolicyStepName, inline, &a)
	e.Must(trainapi.PolicyStepName, sharded, &b)
	if a.Metrics["optimizer_steps"] != 8 { // 4 minibatches (44 or 48 rows), 2 epochs
		t.Fatalf("in-memory step: %v", a.Metrics)
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
