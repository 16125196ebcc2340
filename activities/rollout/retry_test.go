package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// TestRetryOfAndKeep: retries are read from a rollouts object by index with their feedback, bad
// indices are errors that name the object, and Keep writes the chosen rollouts as examples under the
// original prompt.
func TestRetryOfAndKeep(t *testing.T) {
	dir := t.TempDir()
	rs := []rollout.Rollout{
		{ID: "a", Prompt: "1+1=", Answer: "2", Completion: "3", Task: "add2"},
		{ID: "b", Prompt: "2+2=", Answer: "4", Completion: "4", Task: "add2"},
	}
	var buf bytes.Buffer
	if err := rollout.Write(&buf, rs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "r.jsonl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	uri := "file://" + dir + "/r.jsonl"
	ctx := context.Background()
	got, err := retriesOf(ctx, ckpt.New(ckpt.Options{}), rolloutapi.GenerateInput{RetryOf: uri, RetryIndex: []int{1, 0}, RetryFeedback: []string{"fb1", "fb0"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "b" || got[0].Feedback != "fb1" || got[1].ID != "a" || got[1].Feedback != "fb0" {
		t.Fatalf("retries %+v", got)
	}
	for _, bad := range []rolloutapi.GenerateInput{
		{RetryOf: uri, RetryIndex: []int{2}, RetryFeedback: []string{"x"}},
		{RetryOf: uri, RetryIndex: []int{0, 1}, RetryFeedback: []string{"x"}},
		{RetryOf: uri},
	} {
		if _, err := retriesOf(ctx, ckpt.New(ckpt.Options{}), bad); err == nil || !strings.Contains(err.Error(), "r.jsonl") {
			t.Errorf("%+v: got %v, want an error naming the rollouts object", bad, err)
		}
	}
	out, err := (&Activities{Ckpt: ckpt.New(ckpt.Options{})}).Keep(ctx, rolloutapi.KeepInput{Store: "file://" + dir, Run: "run", Phase: "grpo", Iteration: 3, Round: 1, Rollouts: uri, Index: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, CorrectionsKey("run", "grpo", 3, 1)))
	if err != nil {
		t.Fatal(err)
	}
	var ex struct{ ID, Prompt, Completion, Answer string }
	if err := json.Unmarshal(b, &ex); err != nil || out.Count != 1 || ex.ID != "b" || ex.Prompt != "2+2=" || ex.Completion != "4" || ex.Answer != "4" {
		t.Fatalf("kept %s (%+v, %v)", b, out, err)
	}
	if _, err := (&Activities{Ckpt: ckpt.New(ckpt.Options{})}).Keep(ctx, rolloutapi.KeepInput{Store: "file://" + dir, Rollouts: uri, Index: []int{7}}); err == nil {
		t.Error("keeping index 7 of 2 rollouts must fail")
	}
}
