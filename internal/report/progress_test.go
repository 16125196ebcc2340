package report

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/activities/demo/demoapi"
	"github.com/temperml/temper/workflows"
)

// simulate feeds the estimator what `follow` sees: a tick every 500 ms from `from` to `to` seconds after
// the phase started, with the phase running at 1 step/s and its heartbeats reaching the server in
// batches every `flush` seconds. It returns the ETA shown at each tick (seconds; -1: none).
func simulate(e *ETA, total int, flush, from, to float64) []float64 {
	t0 := time.Unix(1_000_000, 0)
	var shown []float64
	for t := from; t <= to; t += 0.5 {
		step := min(total, int(math.Floor(t/flush)*flush))
		s := Snapshot{Progress: workflows.PipelineProgress{Phase: "sft"}, Activity: "train.Chunk", Step: demoapi.Progress{Step: step, Total: total},
			ChildStart: t0}
		eta, _ := e.Update(s, t0.Add(time.Duration(t*float64(time.Second))))
		shown = append(shown, eta.Seconds())
		if eta < 0 {
			shown[len(shown)-1] = -1
		}
	}
	return shown
}

// TestETAFollowsMaxSeconds: an SFT phase with many steps but max_seconds 240 shows the time left of
// the 240 s, not the hours its steps would take (the "ETA 27h40m" of issue 18).
func TestETAFollowsMaxSeconds(t *testing.T) {
	cases := []struct {
		name       string
		maxSeconds float64
		total      int
		at         float64 // seconds into the phase
		want       float64 // ETA shown, seconds
	}{
		{"max_seconds ends first", 240, 100000, 120, 120},
		{"steps end first", 10000, 300, 120, 180},
		{"no limit", 0, 300, 120, 180},
		{"limit already reached", 240, 100000, 300, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &ETA{MaxSeconds: map[string]float64{"sft": c.maxSeconds}}
			shown := simulate(e, c.total, 1, 0, c.at)
			if got := shown[len(shown)-1]; math.Abs(got-c.want) > 0.05*c.want+1 {
				t.Errorf("ETA at %vs: %vs, want %vs", c.at, got, c.want)
			}
		})
	}
}

// TestETAMovesSmoothly: heartbeats arrive in 25 s batches and following started 10 s into the phase, so
// successive raw estimates disagree by ~20 s. The shown ETA must count down tick by tick without
// jumping (at most max(1 s, 2% of itself) per second off the countdown) and still converge on the truth.
func TestETAMovesSmoothly(t *testing.T) {
	e := &ETA{}
	const total = 300
	shown := simulate(e, total, 25, 10, 250)
	prev := -1.0
	for i, v := range shown {
		if prev >= 0 && v >= 0 {
			if off, allowed := math.Abs(v-max(0, prev-0.5)), 0.5*max(1, 0.02*prev)+1e-6; off > allowed {
				t.Fatalf("tick %d: ETA went %.2f → %.2f s: %.2f s off the countdown, allowed %.2f; shown: %v", i, prev, v, off, allowed, shown)
			}
		}
		prev = v
	}
	// At 250 s the truth is 50 s left.
	if got := shown[len(shown)-1]; math.Abs(got-50) > 10 {
		t.Errorf("ETA at 250 s: %.1f s, want about 50 s; shown: %v", got, shown)
	}
}

// TestProgressBarInterpolates: between two heartbeat batches the bar fills at the measured rate,
// while the printed step stays the reported one.
func TestProgressBarInterpolates(t *testing.T) {
	e := &ETA{}
	t0 := time.Unix(1_000_000, 0)
	snap := func(step int) Snapshot {
		return Snapshot{Progress: workflows.PipelineProgress{Phase: "sft", Total: 1}, Activity: "train.Chunk", Step: demoapi.Progress{Step: step, Total: 96}}
	}
	e.Update(snap(0), t0)
	e.Update(snap(24), t0.Add(24*time.Second)) // 1 step/s
	eta, frac := e.Update(snap(24), t0.Add(36*time.Second))
	line := ProgressLine(snap(24), eta, frac)
	if !strings.Contains(line, "[#########...............] step 24/96") || !strings.Contains(line, "ETA 1m0s") {
		t.Errorf("line %q: want the bar at step ~36 of 96 (9 of 24 cells), step 24/96 and ETA 1m0s", line)
	}
}

// TestProgressUnit: the bar names what its activity counts, so an evaluation's or a rollout's
// heartbeat does not print as an optimizer step.
func TestProgressUnit(t *testing.T) {
	for _, c := range []struct{ activity, want string }{
		{"train.Chunk", "step 3/10"}, {"train.PolicyStep", "step 3/10"}, {"train.PrefChunk", "step 3/10"},
		{"train.Evaluate", "eval 3/10"}, {"train.RewardEvaluate", "eval 3/10"},
		{"rollout.Generate", "prompts 3/10"}, {"reward.Score", "scored 3/10"}, {"train.RefLogProbs", "done 3/10"},
	} {
		s := Snapshot{Progress: workflows.PipelineProgress{Phase: "p", Total: 1}, Activity: c.activity, Step: demoapi.Progress{Step: 3, Total: 10}}
		if line := ProgressLine(s, -1, -1); !strings.HasSuffix(line, "] "+c.want) {
			t.Errorf("%s: line %q, want it to end in %q", c.activity, line, c.want)
		}
	}
}

func TestMaxSecondsOf(t *testing.T) {
	in := workflows.PipelineInput{Phases: []workflows.PhaseSpec{
		{Name: "a", Kind: "sft", Config: json.RawMessage(`{"max_seconds":240,"steps":100000}`)},
		{Name: "b", Kind: "demo"},
	}}
	got := maxSecondsOf(in)
	if len(got) != 1 || got["a"] != 240 {
		t.Errorf("got %v", got)
	}
}
