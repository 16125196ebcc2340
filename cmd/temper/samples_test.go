package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// TestSamples writes rollouts objects where activities/rollout writes them (rolloutapi.RolloutsKey) in a file
// store, prints them with `temper samples`, and scores `--json`'s output with `temper score`.
func TestSamples(t *testing.T) {
	dir := t.TempDir()
	store := "file://" + dir
	put := func(iter int, tag string, rs []rollout.Rollout) {
		p := filepath.Join(dir, filepath.FromSlash(rolloutapi.RolloutsKey("r1", "grpo", iter, tag)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := rollout.Write(&b, rs); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ro := func(id string, group int, completion string, version int) rollout.Rollout {
		return rollout.Rollout{ID: id, Group: group, Task: "add2", Prompt: "12+34=", Answer: "46", Tokens: []int{1, 2, 3}, LogProbs: []float32{-1, -2, -3},
			Completion: completion, StopReason: "eos", PolicyVersion: version}
	}
	put(0, "", []rollout.Rollout{ro("i0-0", 0, "45", 0)})
	put(1, "", []rollout.Rollout{ro("i1-0", 0, "46", 1), ro("i1-1", 0, "47", 1)})
	put(1, "retry1", []rollout.Rollout{{ID: "i1-1r", Group: 0, Task: "add2", Prompt: "12+34=", Answer: "46", Completion: "46", StopReason: "eos",
		PolicyVersion: 1, Attempt: 1, Feedback: "task: 47 is wrong"}})
	// The verdicts the reward role writes beside a shard are not rollouts.
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rolloutapi.RolloutsKey("r1", "grpo", 1, "s0000.verdicts"))),
		[]byte(`{"id":"i1-0","score":1,"pass":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"samples", "r1", "grpo", "--store", store, "--temporal", "127.0.0.1:1"}

	out, err := cli(t, base...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range []string{"iteration 1 (of 0..1)", `group 0  prompt "12+34="  answer "46"`, `i1-0       policy v1  eos      3 tokens  "46"`,
		`i1-1r      policy v1  eos      0 tokens  "46"  (retry 1 after: "task: 47 is wrong")`, "iter-000001-retry1.jsonl: 1 rollouts"} {
		if !strings.Contains(out, w) {
			t.Errorf("latest iteration: output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "verdicts") {
		t.Errorf("printed a verdicts object as rollouts:\n%s", out)
	}
	if strings.Contains(out, "i0-0") {
		t.Errorf("latest iteration printed iteration 0:\n%s", out)
	}
	if out, err = cli(t, append(base, "--iter", "0")...); err != nil || !strings.Contains(out, `"45"`) || strings.Contains(out, "i1-0") {
		t.Errorf("--iter 0: %v\n%s", err, out)
	}

	// --json is what `temper score` reads: two of the three rollouts of iteration 1 are right.
	out, err = cli(t, append(base, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	scored, err := cli(t, "score", writeFile(t, "s.jsonl", out))
	if err != nil || !strings.Contains(scored, "3 completions: 3 judged, 0 errors (0 timed out); mean score 0.6667") {
		t.Errorf("score of samples --json: %v\n%s", err, scored)
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing iteration", []string{"--iter", "5"}, "--iter 5: r1 grpo has rollouts for iterations 0, 1"},
		{"not an RL phase", []string{}, "no rollouts under " + store + "/runs/r1/sft/rollouts: is sft an RL phase of run r1"},
	} {
		args := append([]string(nil), base...)
		if c.name == "not an RL phase" {
			args[2] = "sft"
		}
		_, err := cli(t, append(args, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		var ee *exitError
		if c.name == "missing iteration" && !errors.As(err, &ee) {
			t.Errorf("%s: want a usage error", c.name)
		}
	}
}
