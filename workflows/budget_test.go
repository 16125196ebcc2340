package workflows_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestTimeBudgetAndCurve runs an sft phase and a grpo phase with max_seconds far below what their
// steps/iterations would take: each must stop after the unit of work that crosses the budget (one
// chunk, one iteration), evaluate there, and return its exact-match curve (a point before, one at the
// stop, with training seconds that only grow). bench rl-vs-sft compares phases this way.
func TestTimeBudgetAndCurve(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	in := rlPipeline(t, `{"iterations":50,"max_seconds":0.001,"eval":{"before":true}}`)
	in.Phases = append(in.Phases, workflows.PhaseSpec{Name: "more", Kind: "sft", From: "sft", Config: json.RawMessage(
		`{"data":{"task":"add2","train_examples":300,"heldout_examples":16},"batch":{"rows":8,"seq":32},"steps":60,"chunk_steps":3,
		"max_seconds":0.001,"eval":{"examples":16,"max_new_tokens":4,"before":true}}`)})
	out, id := runPipeline(t, env, in, 5*time.Minute)
	for _, c := range []struct {
		phase int
		unit  string
		want  float64
	}{{1, "iterations", 1}, {2, "steps", 3}} {
		r := out.Phases[c.phase]
		if got := r.Metrics[c.unit]; got != c.want {
			t.Errorf("%s: %s = %v, want %v (stop after the first unit past the budget)", r.Name, c.unit, got, c.want)
		}
		if len(r.Curve) != 2 || r.Curve[0].Seconds != 0 || r.Curve[1].Seconds <= 0 || r.Curve[1].Step != int(c.want) {
			t.Errorf("%s: curve %+v: want a point at 0 s and one at the stop", r.Name, r.Curve)
			continue
		}
		if r.Curve[len(r.Curve)-1].ExactMatch != r.Metrics["heldout_exact_match"] || r.Metrics["train_seconds"] != r.Curve[1].Seconds {
			t.Errorf("%s: curve %+v disagrees with metrics %v", r.Name, r.Curve, r.Metrics)
		}
	}
	replayAll(t, env.Client, id)
}

// TestRLRetainsCheckpoints: an RL phase keeps only keep_last policy versions of its branch plus the
// best (marked) one, instead of one checkpoint per iteration, and the run still replays.
func TestRLRetainsCheckpoints(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	in := rlPipeline(t, `{"iterations":7,"keep_last":2,"eval_every":2,"eval":{"before":true}}`)
	out, id := runPipeline(t, env, in, 5*time.Minute)
	dir := strings.TrimPrefix(in.Store, "file://") + "/runs/" + id + "/grpo"
	steps, err := filepath.Glob(dir + "/step-*")
	if err != nil {
		t.Fatal(err)
	}
	var best int
	for _, s := range steps {
		if _, err := os.Stat(filepath.Join(s, "BEST")); err == nil {
			best++
		}
	}
	t.Logf("kept %d checkpoints (%d marked best) of 7: %v", len(steps), best, steps)
	if best != 1 || len(steps) > 3 || len(steps) < 2 {
		t.Errorf("kept %d checkpoints (%d best), want the last 2 plus the one best", len(steps), best)
	}
	if !strings.HasSuffix(out.Phases[1].Checkpoint, "/step-000007/") {
		t.Errorf("final checkpoint %s", out.Phases[1].Checkpoint)
	}
	replayAll(t, env.Client, id)
}
