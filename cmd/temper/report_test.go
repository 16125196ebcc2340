package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// reportPipeline is a short sft → grpo run whose grpo phase back-tracks once (a NaN at iteration 2),
// so that its report has a branch to mark.
func reportPipeline(t *testing.T) workflows.PipelineInput {
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":300,"heldout_examples":16},
		"batch":{"rows":8,"seq":32},"steps":8,"chunk_steps":4,"eval":{"examples":16,"max_new_tokens":4,"every_chunks":1}}`
	grpo := `{"data":{"task":"add2","heldout_examples":16},"iterations":5,"prompts":4,"group":4,"max_new_tokens":4,
		"eval_every":2,"eval":{"examples":16,"max_new_tokens":4,"before":true},"heartbeat_timeout":"10s","inject_nan_at":3}`
	return workflows.PipelineInput{Name: "report", Store: "file://" + t.TempDir(), Seed: 5, Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
		{Name: "grpo", Kind: "grpo", Config: json.RawMessage(grpo)},
	}}
}

// TestReportAndSearch runs a short pipeline, checks the metrics log its activities wrote, finds its
// phases with `temper ls --kind --where`, and writes its report.
func TestReportAndSearch(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	addr := env.Server.FrontendAddr()
	in := reportPipeline(t)
	id := fmt.Sprintf("report-%d", time.Now().UnixNano())
	out := waitRun(t, mustStart(t, env.Client, id, in))
	if out.Phases[1].Metrics["backtracks"] != 1 {
		t.Fatalf("want one back-track, got %v", out.Phases[1].Metrics)
	}

	// Metrics log: one training record per sft step, an evaluation per chunk (every_chunks 1) and before.
	cl := ckpt.New(ckpt.Options{})
	recs, err := cl.ReadMetrics(context.Background(), in.Store, id, "sft")
	if err != nil {
		t.Fatal(err)
	}
	var train, eval []int
	for _, r := range recs {
		if r.Kind == ckpt.RecordTrain {
			train = append(train, r.Step)
			if _, ok := r.Metrics["loss"]; !ok || r.Metrics["lr"] <= 0 || r.Metrics["tokens_per_s"] <= 0 || r.Time <= 0 {
				t.Errorf("sft step %d record %v: want loss, lr, tokens_per_s and time", r.Step, r)
			}
		} else {
			eval = append(eval, r.Step)
			if _, ok := r.Metrics["heldout_exact_match"]; !ok {
				t.Errorf("sft eval record %v lacks heldout_exact_match", r)
			}
		}
	}
	if fmt.Sprint(train) != "[1 2 3 4 5 6 7 8]" || fmt.Sprint(eval) != "[0 4 8]" {
		t.Errorf("sft log: train steps %v, eval steps %v; want 1..8 and 0 4 8", train, eval)
	}
	// The grpo phase evaluated before (0), ran iterations 1-3 (evaluating 2; the 3rd non-finite), then
	// branch b1 ran 4-5 in its own directory, evaluating both.
	for dir, want := range map[string]string{"grpo": "[0 1 2 2 3]", "grpo.b1": "[4 4 5 5]"} {
		recs, err := cl.ReadMetrics(context.Background(), in.Store, id, dir)
		if err != nil {
			t.Fatal(err)
		}
		var steps []int
		for _, r := range recs {
			steps = append(steps, r.Step)
			if r.Kind == ckpt.RecordTrain && r.Metrics["non_finite"] == 0 {
				for _, k := range []string{"reward_mean", "kl", "entropy", "lr", "train_tokens_per_s"} {
					if _, ok := r.Metrics[k]; !ok {
						t.Errorf("%s iteration %d lacks %s: %v", dir, r.Step, k, r.Metrics)
					}
				}
			}
		}
		if fmt.Sprint(steps) != want {
			t.Errorf("%s log steps %v, want %s (train and eval records)", dir, steps, want)
		}
	}

	// temper ls --kind --where: the visibility query finds the branch that holds the phase's result.
	em := out.Phases[1].Metrics["heldout_exact_match"]
	where := fmt.Sprintf("TemperRun = '%s' AND TemperExactMatch >= %v", id, em)
	var ls string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		ls, err = cli(t, "ls", "--temporal", addr, "--kind", "grpo", "--where", where)
		if err != nil {
			t.Fatalf("ls: %v\n%s", err, ls)
		}
		if strings.Contains(ls, id+".grpo.b1") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(ls, id+".grpo.b1") || strings.Contains(ls, id+".sft") || !strings.Contains(ls, "b1") {
		t.Errorf("ls --kind grpo --where %q:\n%s", where, ls)
	}
	if out, err := cli(t, "ls", "--temporal", addr, "--kind", "gpro"); err == nil || !strings.Contains(out+err.Error(), "grpo") {
		t.Errorf("ls --kind gpro: want an error listing the kinds, got %v\n%s", err, out)
	}

	dir := filepath.Join(t.TempDir(), "report")
	rep, err := cli(t, "report", id, "--temporal", addr, "--out", dir)
	if err != nil {
		t.Fatalf("report: %v\n%s", err, rep)
	}
	for _, name := range []string{"01-sft-by-step.png", "01-sft-by-time.png", "02-grpo-by-step.png", "02-grpo-by-time.png"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("report: %v\n%s", err, rep)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() < 800 {
			t.Errorf("%s: %v, bounds %v", name, err, img.Bounds())
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data:image/png;base64,", "grpo.b1", "non-finite loss or gradient at iteration 3",
		"held-out exact match", "reward mean", "KL to reference", "entropy", "learning rate", "tokens/s",
		`"task": "add2"`, "Sample rollouts", "/runs/" + id + "/sft/step-000008/"} {
		if !strings.Contains(html.UnescapeString(string(page)), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if os.Getenv("TEMPER_KEEP_REPORT") != "" { // to look at the figures: TEMPER_KEEP_REPORT=/dir
		_ = os.CopyFS(os.Getenv("TEMPER_KEEP_REPORT"), os.DirFS(dir))
	}
}

// TestLsNamesMissingSearchAttributes: on a namespace without Temper's search attributes (an external
// cluster nobody registered them on), `temper ls --kind` fails with the commands that register them.
func TestLsNamesMissingSearchAttributes(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t, "nosa-ls")
	want := "temporal operator search-attribute create --namespace " + ns + " --name TemperKind --type Keyword"
	var out string
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out, err = cli(t, "ls", "--temporal", env.Server.FrontendAddr(), "--namespace", ns, "--kind", "grpo")
		if (err != nil && strings.Contains(err.Error(), want)) || time.Now().After(deadline) {
			break // until the server's namespace cache knows the new namespace
		}
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ls on a namespace without search attributes: %v\n%s\nwant the registration commands (%s)", err, out, want)
	}
}
