package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/lm"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/workers"
)

// TestDataGenPairsFromModel: `temper data gen TASK --pairs --from CKPT` samples the checkpoint, keeps
// only pairs whose chosen side the task's verifier accepts and whose rejected side it rejects, writes
// the held-out file next to the output, and --from without --pairs is a usage error.
func TestDataGenPairsFromModel(t *testing.T) {
	dir := t.TempDir()
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	a := &lm.Activities{Activities: &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: workers.NewTrainEngine(workers.EngineOptions{})}}
	init, err := a.Init(context.Background(), trainapi.InitInput{Store: "file://" + dir, Run: "r", Phase: "p", Model: modelcfg.Config(cfg), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "pairs.jsonl")
	if msg, err := cli(t, "data", "gen", "add2", "--pairs", "--from", init.Checkpoint, "--n", "12", "--samples", "4", "--heldout", "5", "--out", out); err != nil {
		t.Fatalf("data gen: %v\n%s", err, msg)
	}
	task, _ := tasks.Lookup("add2")
	for _, name := range []string{out, strings.TrimSuffix(out, ".jsonl") + ".heldout.jsonl"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = tasks.ReadPrefJSONL(f, name, func(_ int, ex tasks.PrefExample) error {
			n++
			ok, _ := task.Check(tasks.Example{Prompt: ex.Prompt, Answer: ex.Answer}, ex.Chosen)
			bad, _ := task.Check(tasks.Example{Prompt: ex.Prompt, Answer: ex.Answer}, ex.Rejected)
			if !ok || bad {
				t.Errorf("%s: pair %+v: chosen must pass and rejected fail", name, ex)
			}
			return nil
		})
		f.Close()
		if err != nil || n == 0 {
			t.Fatalf("%s: %d pairs, %v", name, n, err)
		}
	}
	if _, err := cli(t, "data", "gen", "add2", "--from", init.Checkpoint); err == nil {
		t.Error("--from without --pairs must be a usage error")
	}
}

// TestDataGenChat: --chat poses examples as user/assistant conversations; with --text they are the
// conversation as the chat template renders it (what an agentic episode decodes to), --pack of them
// a line; --pack without --text and --chat with --tools are usage errors.
func TestDataGenChat(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "chat.jsonl")
	if msg, err := cli(t, "data", "gen", "add2", "--n", "6", "--text", "--chat", "--pack", "3", "--out", out); err != nil {
		t.Fatalf("data gen: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	exs, err := tasks.ReadAll(strings.NewReader(string(b)), out)
	if err != nil || len(exs) != 2 {
		t.Fatalf("%d lines (%v): want 2 of 3 examples each", len(exs), err)
	}
	train, _ := tasks.Split(mustTask(t, "add2"), 6, 0, 1)
	want := ""
	for _, ex := range train[:3] {
		want += "<|user|>\n" + ex.Prompt + "\n<|assistant|>\n" + ex.Completion + "\n"
	}
	if exs[0].Text != want {
		t.Fatalf("text %q\nwant %q", exs[0].Text, want)
	}
	if msg, err := cli(t, "data", "gen", "add2", "--n", "2", "--chat", "--out", out); err != nil {
		t.Fatalf("data gen --chat: %v\n%s", err, msg)
	}
	b, _ = os.ReadFile(out)
	if exs, err = tasks.ReadAll(strings.NewReader(string(b)), out); err != nil || len(exs[0].Messages) != 2 || exs[0].Messages[1].Content != train[0].Completion {
		t.Fatalf("--chat examples %+v (%v)", exs, err)
	}
	if msg, err := cli(t, "data", "gen", "add2", "--n", "2", "--heldout", "1", "--text", "--chat", "--out", out); err != nil {
		t.Fatalf("data gen --heldout: %v\n%s", err, msg)
	}
	b, _ = os.ReadFile(strings.TrimSuffix(out, ".jsonl") + ".heldout.jsonl")
	if held, err := tasks.ReadAll(strings.NewReader(string(b)), "held"); err != nil || !strings.HasPrefix(held[0].Prompt, "<|user|>\n") ||
		!strings.HasSuffix(held[0].Prompt, "=\n<|assistant|>\n") {
		t.Fatalf("held-out prompts %+v (%v): want them rendered up to the assistant's turn", held, err)
	}
	for _, args := range [][]string{{"--pack", "2"}, {"--chat", "--tools"}} {
		if _, err := cli(t, append([]string{"data", "gen", "bigmul", "--n", "2"}, args...)...); err == nil {
			t.Errorf("data gen %v: want a usage error", args)
		}
	}
}

func mustTask(t *testing.T, name string) tasks.Task {
	t.Helper()
	task, err := tasks.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return task
}
