package rollout

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
)

func TestShardRanges(t *testing.T) {
	for _, c := range []struct {
		prompts, group, shards int
		want                   [][2]int
	}{
		{64, 4, 4, [][2]int{{0, 16}, {16, 32}, {32, 48}, {48, 64}}}, // 16 prompts (64 samples) per batch
		{10, 16, 4, [][2]int{{0, 4}, {4, 8}, {8, 10}}},              // 3 batches: at most 3 shards
		{5, 64, 2, [][2]int{{0, 3}, {3, 5}}},                        // one prompt per batch
		{100, 8, 1, [][2]int{{0, 100}}},
		{512, 16, 3, [][2]int{{0, 172}, {172, 344}, {344, 512}}}, // 128 batches of 4 prompts: 43, 43, 42
		{3, 2, 0, [][2]int{{0, 3}}},                              // shards < 1 reads as 1
	} {
		if got := rolloutapi.ShardRanges(c.prompts, c.group, c.shards); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ShardRanges(%d, %d, %d) = %v, want %v", c.prompts, c.group, c.shards, got, c.want)
		}
	}
}

func TestBatchCuts(t *testing.T) {
	for _, c := range []struct {
		lo, n, group int
		want         []int
	}{
		{16, 16, 4, []int{64}},
		{3, 5, 32, []int{32, 96, 160}}, // two prompts per batch: prompt 3 | 4 5 | 6 7
		{0, 3, 3, []int{9}},
	} {
		if got := batchCuts(c.lo, c.n, c.group); !reflect.DeepEqual(got, c.want) {
			t.Errorf("batchCuts(%d, %d, %d) = %v, want %v", c.lo, c.n, c.group, got, c.want)
		}
	}
	if got := flatCuts(130); !reflect.DeepEqual(got, []int{64, 128, 130}) {
		t.Errorf("flatCuts(130) = %v", got)
	}
	if got := flatCuts(64); !reflect.DeepEqual(got, []int{64}) {
		t.Errorf("flatCuts(64) = %v", got)
	}
}

// TestShardBatchesMatchOneShard: whatever the number of shards, every generation batch holds the
// same samples as with one shard (so padding and shapes, hence results, are the same).
func TestShardBatchesMatchOneShard(t *testing.T) {
	batches := func(prompts, group, shards int) [][2]int { // global sample ranges
		var out [][2]int
		for _, r := range rolloutapi.ShardRanges(prompts, group, shards) {
			lo := r[0] * group
			prev := 0
			for _, c := range batchCuts(r[0], r[1]-r[0], group) {
				out = append(out, [2]int{lo + prev, lo + c})
				prev = c
			}
		}
		return out
	}
	for _, prompts := range []int{1, 7, 16, 33, 512} {
		for _, group := range []int{1, 2, 3, 16, 100} {
			one := batches(prompts, group, 1)
			for _, shards := range []int{2, 4, 7} {
				if got := batches(prompts, group, shards); !reflect.DeepEqual(got, one) {
					t.Fatalf("%d prompts × %d, %d shards: batches %v, one shard %v", prompts, group, shards, got, one)
				}
			}
		}
	}
}

// TestPromptCache: an iteration's prompts come from the worker's cache, read once per data file and
// read again when the file changes; shards draw the same prompts as the whole iteration.
func TestPromptCache(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "train.jsonl")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"id":"a","prompt":"1+1=","answer":"2"}` + "\n" + `{"id":"b","prompt":"2+2=","answer":"4"}` + "\n")
	spec := trainapi.DataSpec{Train: "file://" + file}
	a := &Activities{Ckpt: ckpt.New(ckpt.Options{})}
	ctx := context.Background()
	before := promptLoads.Load()
	for it := range 3 {
		set, err := a.prompts.get(ctx, a.Ckpt, spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := set.draw(spec, 1, it, 1)[0].ID; got != []string{"a", "b", "a"}[it] {
			t.Errorf("iteration %d drew %s", it, got)
		}
	}
	if n := promptLoads.Load() - before; n != 1 {
		t.Fatalf("3 iterations read the file %d times, want once", n)
	}
	write(`{"id":"c","prompt":"3+3=","answer":"6"}` + "\n") // another size: another identity
	set, err := a.prompts.get(ctx, a.Ckpt, spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := promptLoads.Load() - before; n != 2 || set.draw(spec, 1, 0, 1)[0].ID != "c" {
		t.Fatalf("after a rewrite: %d reads, drew %s", n, set.draw(spec, 1, 0, 1)[0].ID)
	}
	// Built-in task: a shard's prompts are its slice of the iteration's.
	task := trainapi.DataSpec{Task: "add2", TrainExamples: 1, HeldoutExamples: 16}
	set, err = a.prompts.get(ctx, a.Ckpt, task, 3)
	if err != nil {
		t.Fatal(err)
	}
	all := set.draw(task, 3, 2, 8)
	part, lo, err := promptRange(rolloutapi.GenerateInput{PromptLo: 4, PromptHi: 8}, all)
	if err != nil || lo != 4 || !reflect.DeepEqual(part, all[4:]) {
		t.Fatalf("shard [4, 8): lo %d, %v", lo, err)
	}
	if _, _, err := promptRange(rolloutapi.GenerateInput{Run: "r", Phase: "p", PromptLo: 6, PromptHi: 9}, all); err == nil {
		t.Error("prompts [6, 9) of 8 must fail")
	}
	old, err := Prompts(ctx, a.Ckpt, task, 3, 2, 8) // the exported, uncached path draws the same
	if err != nil || !reflect.DeepEqual(old, all) {
		t.Fatalf("Prompts: %v", err)
	}
}
