package preference_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/workers/traintest"
)

// TestOnlineDPOStepHeartbeatsThroughSlowWork: an online DPO step of one minibatch, scheduled by a
// workflow with a heartbeat timeout, whose one optimizer step takes twice that timeout, keeps
// heartbeating while it works (train.Beats' goroutine) and completes on its first attempt; without
// those heartbeats Temporal times the attempt out (it beat only between minibatches).
func TestOnlineDPOStepHeartbeatsThroughSlowWork(t *testing.T) {
	const timeout = 3 * time.Second // the SDK sends a batch's heartbeats every 0.8 timeout
	e := traintest.New(t)
	var pol trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "hb", Phase: "sft", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 11}, &pol)
	shard := writeShard(t, t.TempDir(), []rollout.Rollout{
		{ID: "a0", Group: 0, PromptTokens: []int{tokenize.ByteBOS, 'q', '='}, Tokens: []int{'4', tokenize.ByteEOS}, LogProbs: []float32{-1, -1}},
		{ID: "a1", Group: 0, PromptTokens: []int{tokenize.ByteBOS, 'q', '='}, Tokens: []int{'7', tokenize.ByteEOS}, LogProbs: []float32{-1, -1}},
		{ID: "b0", Group: 1, PromptTokens: []int{tokenize.ByteBOS, 'r', '='}, Tokens: []int{'2'}, LogProbs: []float32{-1}},
		{ID: "b1", Group: 1, PromptTokens: []int{tokenize.ByteBOS, 'r', '='}, Tokens: []int{'5'}, LogProbs: []float32{-1}},
	}, []float64{1, 0, 0, 1})

	in := trainapi.OnlineDPOStepInput{Store: e.Store, Run: "hb", Phase: "odpo", Policy: pol.Checkpoint, Reference: pol.Checkpoint,
		Shards: []trainapi.ScoredShard{shard}, Loss: losscfg.DefaultPreference(losscfg.PrefDPO), FreshOptimizer: true,
		Optim: trainapi.Optim{LR: 1e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}}
	var out trainapi.PolicyStepOutput
	if err := e.RunSlowOnce(trainapi.OnlineDPOStepName, timeout, 2*timeout, in, &out); err != nil {
		t.Fatalf("online DPO step with a %v heartbeat timeout: %v", timeout, err)
	}
	if out.Metrics["pairs_formed"] != 2 || out.Metrics["optimizer_steps"] != 1 || out.Metrics["seconds_optimize"] < (2*timeout).Seconds() {
		t.Fatalf("want one optimizer step over 2 pairs of at least %v (longer than the heartbeat timeout): %v", 2*timeout, out.Metrics)
	}
}

// writeShard writes rs and their scores as one scored shard (a rollouts and a verdicts object).
func writeShard(t *testing.T, dir string, rs []rollout.Rollout, scores []float64) trainapi.ScoredShard {
	t.Helper()
	var b bytes.Buffer
	if err := rollout.Write(&b, rs); err != nil {
		t.Fatal(err)
	}
	var v strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&v, `{"id":%q,"score":%g}`+"\n", r.ID, scores[i])
	}
	ro, vo := filepath.Join(dir, "s0.jsonl"), filepath.Join(dir, "s0.verdicts.jsonl")
	if err := os.WriteFile(ro, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vo, []byte(v.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return trainapi.ScoredShard{Rollouts: "file://" + ro, Verdicts: "file://" + vo}
}
