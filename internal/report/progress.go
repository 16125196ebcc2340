package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/demo/demoapi"
	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/workflows"
)

// Follow draws a progress line on progress until the run ends, then prints its result on out.
func Follow(ctx context.Context, c client.Client, run client.WorkflowRun, progress, out io.Writer, asJSON bool) error {
	start := time.Now()
	done := make(chan error, 1)
	var res workflows.PipelineOutput
	go func() { done <- run.Get(ctx, &res) }()
	tty := isTTY(progress)
	var last string
	eta := ETA{MaxSeconds: phaseMaxSeconds(ctx, c, run.GetID())}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if tty && last != "" {
				fmt.Fprintln(progress)
			}
			WriteResult(out, ToResult(run.GetID(), res, time.Since(start), err), asJSON)
			if err != nil {
				return fmt.Errorf("run %s failed", run.GetID())
			}
			return nil
		case <-ctx.Done():
			fmt.Fprintf(progress, "\nstopped following %s; the run goes on (temper status %s)\n", run.GetID(), run.GetID())
			return ctx.Err()
		case <-tick.C:
			s, err := Observe(ctx, c, run.GetID())
			if err != nil {
				continue
			}
			left, frac := eta.Update(s, time.Now())
			if tty {
				line := ProgressLine(s, left, frac)
				fmt.Fprintf(progress, "\r%-100s", line)
				last = line
				continue
			}
			// Logs get one line per observed step, without the ticking ETA.
			if line := ProgressLine(s, -1, -1); line != last {
				fmt.Fprintln(progress, ProgressLine(s, left, -1))
				last = line
			}
		}
	}
}

// ETA turns the observed steps of the current phase into a smooth ETA. Heartbeats reach the server in
// batches (every ~25 s), so the step seen jumps; the rate is measured between observed changes, the
// remaining time counts down in between, and a new estimate is blended in over etaBlend instead of
// replacing the shown one at once. When the phase has max_seconds and that ends it before its steps,
// the ETA is the time left of it.
type ETA struct {
	MaxSeconds map[string]float64 // per phase name; from the pipeline input (0 or absent: no limit)

	phase      string
	phaseStart time.Time
	rates      map[string]*stepRate // per activity type and total: training chunks and evaluations differ

	shown   time.Duration // -1: nothing shown yet
	shownAt time.Time
	source  string // what shown was estimated from: an activity's steps, or max_seconds
}

// stepRate is what one activity's heartbeats said: the first and the latest step seen, and when.
type stepRate struct {
	firstStep, lastStep int
	firstAt, lastAt     time.Time
}

const etaBlend = 10 * time.Second

// Update returns the ETA to show (-1: unknown) and the fraction of the phase's steps done, interpolated
// between heartbeats at the measured rate (-1: unknown).
func (e *ETA) Update(s Snapshot, now time.Time) (time.Duration, float64) {
	if s.Progress.Phase != e.phase || e.rates == nil {
		*e = ETA{MaxSeconds: e.MaxSeconds, phase: s.Progress.Phase, phaseStart: now, rates: map[string]*stepRate{}, shown: -1}
	}
	if !s.ChildStart.IsZero() && s.ChildStart.Before(e.phaseStart) {
		e.phaseStart = s.ChildStart // the phase began before we looked
	}
	raw, frac, source := e.fromSteps(s, now)
	if limit := e.MaxSeconds[e.phase]; limit > 0 {
		left := max(0, time.Duration(limit*float64(time.Second))-now.Sub(e.phaseStart))
		if raw < 0 || left < raw {
			raw, source = left, "max_seconds"
		}
	}
	if raw < 0 {
		return -1, frac
	}
	if e.shown < 0 || source != e.source {
		// A first estimate, or one of another kind (the time limit now binds, an evaluation runs):
		// blending the two would show neither.
		e.shown, e.shownAt, e.source = raw, now, source
		return raw, frac
	}
	dt := now.Sub(e.shownAt)
	predicted := max(0, e.shown-dt)
	w := min(1, float64(dt)/float64(etaBlend))
	// Beyond counting down, the shown ETA moves by at most max(1 s, 2% of itself) per second: a new
	// batch of heartbeats never makes it jump.
	limit := time.Duration(float64(dt) * max(1, 0.02*predicted.Seconds()))
	e.shown = max(0, predicted+min(limit, max(-limit, time.Duration(w*float64(raw-predicted)))))
	e.shownAt = now
	return e.shown, frac
}

// fromSteps is the raw estimate from the running activity's heartbeats (-1: none yet), the fraction
// done (-1: unknown) and the activity it came from.
func (e *ETA) fromSteps(s Snapshot, now time.Time) (time.Duration, float64, string) {
	if s.Step.Total <= 0 {
		return -1, -1, ""
	}
	key := fmt.Sprintf("%s/%d", s.Activity, s.Step.Total)
	r := e.rates[key]
	if r == nil || s.Step.Step < r.lastStep {
		r = &stepRate{firstStep: s.Step.Step, lastStep: s.Step.Step, firstAt: now, lastAt: now}
		e.rates[key] = r
	}
	if s.Step.Step != r.lastStep {
		r.lastStep, r.lastAt = s.Step.Step, now
	}
	raw, frac := time.Duration(-1), float64(s.Step.Step)/float64(s.Step.Total)
	if done := r.lastStep - r.firstStep; done > 0 {
		perStep := r.lastAt.Sub(r.firstAt) / time.Duration(done)
		raw = max(0, perStep*time.Duration(s.Step.Total-r.lastStep)-now.Sub(r.lastAt))
		if perStep > 0 {
			est := float64(r.lastStep) + float64(now.Sub(r.lastAt))/float64(perStep)
			frac = min(est, float64(s.Step.Total)) / float64(s.Step.Total)
		}
	}
	return raw, frac, key
}

// ProgressLine renders the phase, a bar filled to frac (the reported step's fraction when frac < 0),
// the reported step and the ETA (when eta >= 0).
func ProgressLine(s Snapshot, eta time.Duration, frac float64) string {
	p := s.Progress
	line := fmt.Sprintf("phase %d/%d %s (%s)", p.Index+1, p.Total, p.Phase, p.Kind)
	if s.Step.Total > 0 {
		const width = 24
		if frac < 0 {
			frac = float64(s.Step.Step) / float64(s.Step.Total)
		}
		filled := min(width, max(0, int(frac*width)))
		line += fmt.Sprintf(" [%s%s] %s %d/%d", strings.Repeat("#", filled), strings.Repeat(".", width-filled), progressUnit(s.Activity), s.Step.Step, s.Step.Total)
	}
	if eta >= 0 {
		line += " ETA " + eta.Round(time.Second).String()
	}
	if s.Attempt > 1 {
		line += fmt.Sprintf(" (attempt %d)", s.Attempt)
	}
	return line
}

// progressUnit names what the running activity's heartbeat counts: optimizer steps for training chunks
// and policy steps, held-out prompts for evaluations, prompts for rollouts, samples for scoring; so an
// evaluation's "64/1500" does not read as step 64 of a 1,500-step phase.
func progressUnit(activity string) string {
	switch {
	// Every kind's chunk activity is named train.*Chunk and every evaluation train.*Evaluate.
	case strings.HasSuffix(activity, "Chunk") || activity == trainapi.PolicyStepName || activity == demoapi.TickName:
		return "step"
	case strings.HasSuffix(activity, "Evaluate"):
		return "eval"
	case activity == rolloutapi.GenerateName:
		return "prompts"
	case activity == rewardapi.ScoreName:
		return "scored"
	default:
		return "done"
	}
}

// phaseMaxSeconds reads each phase's max_seconds from the run's input, so the ETA can follow it; nil
// when the input cannot be read.
func phaseMaxSeconds(ctx context.Context, c client.Client, id string) map[string]float64 {
	in, ok := RunInput(ctx, c, id)
	if !ok {
		return nil
	}
	return maxSecondsOf(in)
}

func maxSecondsOf(in workflows.PipelineInput) map[string]float64 {
	out := map[string]float64{}
	for _, p := range in.Phases {
		var c struct {
			MaxSeconds float64 `json:"max_seconds"`
		}
		if json.Unmarshal(p.Config, &c) == nil && c.MaxSeconds > 0 {
			out[p.Name] = c.MaxSeconds
		}
	}
	return out
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
