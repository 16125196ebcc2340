package reward

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/verify"
)

// TestStepScoresByReference is the plumbing of PPO's step rewards: the reward activity scores two
// shards' rollouts with a composed spec holding a step-level verifier (a stand-in for "prm", whose
// model this test does not train: one score a line, from the line's text) under the label "steps",
// writes the verdicts beside each shard, and the trainer's reader (train.ReadStepScores) gets every
// sample's step scores back from those objects, in order, by label, with none for an empty
// completion; a wrong label reads none, and verdicts of other rollouts are refused.
func TestStepScoresByReference(t *testing.T) {
	dir := t.TempDir()
	a := NewActivities(nil)
	if err := a.Registry().Register("linesteps", func(json.RawMessage) (verify.Verifier, error) {
		return verify.Func(func(_ context.Context, s verify.Sample) (verify.Verdict, error) {
			v := verify.Verdict{Score: 1, Pass: true, Partial: map[string]float64{}}
			for i, l := range strings.Split(strings.TrimRight(s.Completion, "\n"), "\n") {
				if l != "" {
					v.Partial[StepScoreKey(i)] = float64(len(l)) / 10 // "1" → 0.1, "22" → 0.2, …
				}
			}
			return v, nil
		}), nil
	}); err != nil {
		t.Fatal(err)
	}
	spec := verify.Spec{Verifiers: []verify.Component{{Name: TaskVerifier}, {Name: "linesteps", As: "steps", ReportOnly: true}}}
	completions := [][]string{{"1\n22\n333", "4444"}, {"", "55555\n1"}}
	want := [][]float64{{0.1, 0.2, 0.3}, {0.4}, nil, {0.5, 0.1}}
	var shards []trainapi.ScoredShard
	var all []rollout.Rollout
	ctx := context.Background()
	for s, cs := range completions {
		var rs []rollout.Rollout
		for k, c := range cs {
			rs = append(rs, rollout.Rollout{ID: fmt.Sprintf("s%d-%d", s, k), Task: "add2", Prompt: "2+3=", Answer: "5", Completion: c})
		}
		name := fmt.Sprintf("iter-000000-s%04d.jsonl", s)
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := rollout.Write(f, rs); err != nil {
			t.Fatal(err)
		}
		f.Close()
		uri := "file://" + dir + "/" + name
		out, err := a.ScoreItems(ctx, rewardapi.ScoreInput{Rollouts: uri, Spec: spec, WriteVerdicts: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, trainapi.ScoredShard{Rollouts: uri, Verdicts: out.VerdictsURI})
		all = append(all, rs...)
	}
	got, err := train.ReadStepScores(ctx, a.Ckpt, shards, "steps", all)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("step scores %v, want %v", got, want)
	}
	if got, err := train.ReadStepScores(ctx, a.Ckpt, shards, "task", all); err != nil || fmt.Sprint(got) != "[[] [] [] []]" {
		t.Errorf("a label without step scores: %v, %v", got, err)
	}
	if _, err := train.ReadStepScores(ctx, a.Ckpt, shards[1:], "steps", all); err == nil || !strings.Contains(err.Error(), "does not match the rollouts") {
		t.Errorf("verdicts of other rollouts: %v", err)
	}
}
