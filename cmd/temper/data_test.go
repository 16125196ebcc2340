package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/activities/train/lm"
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
	init, err := a.Init(context.Background(), contract.InitInput{Store: "file://" + dir, Run: "r", Phase: "p", Model: modelcfg.Config(cfg), Seed: 1})
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
