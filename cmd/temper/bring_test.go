package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestBringYourModel: SFT with LoRA → GRPO through the real server on a tiny `temper model
// init`-made Qwen3-shaped directory: the SFT phase trains on chat data rendered by the model's own
// template and tokenised by its own tokenizer, GRPO samples prompts encoded by that tokenizer and
// stops at its end-of-turn ids, and the result exports as a Hugging Face directory that loads.
func TestBringYourModel(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("trains a tiny model with a real 151k vocabulary through the server; runs in CI and without -short")
	}
	dir := filepath.Join(t.TempDir(), "qwen3-tiny")
	if out, err := cli(t, "model", "init", "--like", "qwen3-0.6b", "--out", dir, "--set", "num_hidden_layers=2",
		"--set", "hidden_size=32", "--set", "intermediate_size=64", "--set", "num_attention_heads=2",
		"--set", "num_key_value_heads=1", "--set", "head_dim=16", "--set", "max_position_embeddings=128"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data := t.TempDir()
	var train1, held bytes.Buffer
	for i := range 24 {
		line := fmt.Sprintf(`{"messages":[{"role":"user","content":"%d+%d="},{"role":"assistant","content":"%d"}]}`+"\n", i, i+1, 2*i+1)
		if i < 20 {
			train1.WriteString(line)
		} else {
			held.WriteString(line)
		}
	}
	for name, b := range map[string][]byte{"train.jsonl": train1.Bytes(), "heldout.jsonl": held.Bytes()} {
		if err := os.WriteFile(filepath.Join(data, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := "file://" + t.TempDir()
	yaml := fmt.Sprintf(`name: bring
seed: 1
store: %s
phases:
  - name: sft
    kind: sft
    from: file://%s
    config:
      lora: {rank: 4}
      data: {train: file://%s/train.jsonl, heldout: file://%s/heldout.jsonl}
      batch: {rows: 2, seq: 40}
      steps: 2
      chunk_steps: 2
      eval: {examples: 2, max_new_tokens: 4, before: false}
  - name: grpo
    kind: grpo
    config:
      data: {task: add2, heldout_examples: 4}
      iterations: 2
      prompts: 2
      group: 2
      max_new_tokens: 4
      eval_every: 0
      eval: {examples: 2, max_new_tokens: 4, before: false}
      heartbeat_timeout: 60s
`, store, dir, data, data)
	p, err := pipeline.Parse("bring.yaml", []byte(yaml), nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Get(t)
	env.Roles(t)
	ctx := context.Background()
	const id = "bring-1"
	if _, err := pipeline.Start(ctx, env.Client, id, p); err != nil {
		t.Fatal(err)
	}
	var out workflows.PipelineOutput
	if err := env.Client.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if len(out.Phases) != 2 || out.Phases[1].Metrics["iterations"] != 2 {
		t.Fatalf("phases %+v", out.Phases)
	}
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	sft, err := train.Loader{Ckpt: cl}.Load(ctx, out.Phases[0].Checkpoint, train.LoadOptions{Want: train.WantConfig})
	if err != nil {
		t.Fatal(err)
	}
	if !sft.Merged || sft.Config.Family != "qwen3" || !slices.Contains(sft.HF.Files, "tokenizer.json") {
		t.Errorf("sft checkpoint: merged %v, family %s, files %v: want LoRA adapters on the qwen3 directory, its tokenizer carried", sft.Merged, sft.Config.Family, sft.HF.Files)
	}
	// The rollouts were encoded with the model's own tokenizer: the add2 prompts' ids are Qwen3's.
	enc, err := train.ModelEncoder(dir, train.ChatSpec{})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(store, "file://"), "runs", "*", "grpo", "rollouts", "iter-*.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no rollouts under %s", store)
	}
	rs := readRolloutFile(t, files[0])
	for _, r := range rs[:1] {
		want, err := enc.PromptIDs(tasks.Example{Prompt: r.Prompt})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.PromptTokens, want) {
			t.Errorf("rollout %s: prompt ids %v, want the Qwen3 tokenizer's %v", r.ID, r.PromptTokens, want)
		}
	}
	// The trained policy exports as a Hugging Face directory that loads, with the tokenizer.
	exported := t.TempDir()
	if out, err := cli(t, "ckpt", "export", out.Phases[1].Checkpoint, exported); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(exported, "tokenizer_config.json")); err != nil {
		t.Error(err)
	}
	if out, err := cli(t, "model", "inspect", exported); err != nil || !strings.Contains(out, "tool calls: hermes") {
		t.Errorf("inspect the export: %v\n%s", err, out)
	}
}

func readRolloutFile(t *testing.T, path string) []rollout.Rollout {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rollout.Read(bytes.NewReader(b), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatalf("%s: no rollouts", path)
	}
	return rs
}
