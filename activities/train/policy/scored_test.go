package policy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// TestScoredRolloutsFromShards: a policy step's rollouts are its shards in order, and its rewards
// the scores of their verdicts objects; a verdicts object that judged other rollouts is refused.
func TestScoredRolloutsFromShards(t *testing.T) {
	dir := t.TempDir()
	put := func(name, s string) string {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return "file://" + dir + "/" + name
	}
	shard := func(name string, ids ...string) string {
		var rs []rollout.Rollout
		for i, id := range ids {
			rs = append(rs, rollout.Rollout{ID: id, Group: i})
		}
		var buf bytes.Buffer
		if err := rollout.Write(&buf, rs); err != nil {
			t.Fatal(err)
		}
		return put(name, buf.String())
	}
	s0, s1 := shard("s0.jsonl", "a", "b"), shard("s1.jsonl", "c")
	v0 := put("s0.verdicts.jsonl", `{"id":"a","score":1,"pass":true}`+"\n"+`{"id":"b","score":0.25,"feedback":"no"}`+"\n")
	v1 := put("s1.verdicts.jsonl", `{"id":"c","score":0,"error":"timeout"}`+"\n")
	a := &Activities{&train.Activities{Ckpt: ckpt.New(ckpt.Options{})}}
	ctx := context.Background()
	in := trainapi.PolicyStepInput{Run: "r", Phase: "grpo", Shards: []trainapi.ScoredShard{{Rollouts: s0, Verdicts: v0}, {Rollouts: s1, Verdicts: v1}}}
	rs, err := a.scoredRollouts(ctx, &in)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].ID != "a" || rs[2].ID != "c" || !reflect.DeepEqual(in.Rewards, []float64{1, 0.25, 0}) {
		t.Fatalf("rollouts %d, rewards %v", len(rs), in.Rewards)
	}
	for _, c := range []struct {
		name string
		in   trainapi.PolicyStepInput
		want string
	}{
		{"swapped verdicts", trainapi.PolicyStepInput{Shards: []trainapi.ScoredShard{{Rollouts: s0, Verdicts: v1}}}, "s1.verdicts.jsonl:1"},
		{"short verdicts", trainapi.PolicyStepInput{Shards: []trainapi.ScoredShard{{Rollouts: s1, Verdicts: v1}, {Rollouts: s0, Verdicts: put("short.jsonl", `{"id":"a","score":1}`+"\n")}}}, "1 verdicts for 2 rollouts"},
		{"both forms", trainapi.PolicyStepInput{Rollouts: s0, Shards: []trainapi.ScoredShard{{Rollouts: s0, Verdicts: v0}}}, "not both"},
	} {
		if _, err := a.scoredRollouts(ctx, &c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
