package workflows_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/temperml/temper/activities/control/controlapi"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/workflows"
)

// Workflow unit tests of steering (steer.go): Updates sent on the test clock to the RL phase with
// mocked activities (rl_unit_test.go's world).

// rlIteration is how long one iteration of rlUnitConfig takes on the test clock (generate, score,
// step, retain), so that a time names an iteration.
const rlIteration = 12*time.Minute + 10*time.Second

// updateResult is what became of an Update sent on the test clock.
type updateResult struct {
	accepted, rejected bool
	err                error
	reply              workflows.SteerReply
}

var updateSeq int // update IDs: the test environment drops a second Update with an ID it has seen

// update sends name with req at test-clock time at.
func (w *rlWorld) update(at time.Duration, name string, req workflows.SteerRequest) *updateResult {
	res := &updateResult{}
	w.env.RegisterDelayedCallback(func() {
		updateSeq++
		w.env.UpdateWorkflow(name, fmt.Sprintf("%s-%d", name, updateSeq), &testsuite.TestUpdateCallback{
			OnAccept: func() { res.accepted = true },
			OnReject: func(err error) { res.rejected, res.err = true, err },
			OnComplete: func(v any, err error) {
				if err != nil {
					res.err = err
					return
				}
				if r, ok := v.(workflows.SteerReply); ok {
					res.reply = r
				}
			},
		}, req)
	}, at)
	return res
}

// TestSteerUnitSet: a set accepted during iteration 2 (one iteration done) answers that it applies
// after iteration 2, and from the third policy step on the step trains at the new peak learning
// rate and KL coefficient, the rollouts sample at the new temperature, and the change is written to
// the metrics log once, at its boundary. Invalid requests are refused by the validator (nothing
// pending, nothing applied): a field that is not live, a value out of range, iterations behind the
// boundary, a verifier label the reward lacks.
func TestSteerUnitSet(t *testing.T) {
	w := newRLWorld(t, nil)
	at := rlIteration + 5*time.Minute // iteration index 1 is in its policy step
	refused := map[string]*updateResult{}
	for _, bad := range []string{"model.layers=2", "optimizer.lr=-1", "iterations=1", "reward.verifiers.format.weight=2", "loss.kl_beta=abc"} {
		refused[bad] = w.update(at-time.Minute, workflows.UpdateSet, workflows.SteerRequest{Set: []string{bad}})
	}
	ok := w.update(at, workflows.UpdateSet, workflows.SteerRequest{Set: []string{"optimizer.lr=0.0005", "loss.kl_beta=0.02", "temperature=0.7"}, Note: "calmer"})
	out, err := w.run(rlUnitConfig(t, `{"iterations":5}`))
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal := map[string][]string{
		"model.layers=2":                   {"model.layers", "not a live field", "optimizer.lr"},
		"optimizer.lr=-1":                  {"optimizer.lr", "0 < lr < 10"},
		"iterations=1":                     {"iterations", "want >= 2"},
		"reward.verifiers.format.weight=2": {"reward.verifiers.format.weight", "no verifiers"},
		"loss.kl_beta=abc":                 {"loss.kl_beta", "not a number"},
	}
	for bad, words := range wantRefusal {
		r := refused[bad]
		if !r.rejected || r.accepted || r.err == nil {
			t.Errorf("%s: accepted %v, rejected %v (%v): want refused", bad, r.accepted, r.rejected, r.err)
			continue
		}
		for _, word := range words {
			if !strings.Contains(r.err.Error(), word) {
				t.Errorf("%s refused with %q: want it to name %q", bad, r.err, word)
			}
		}
	}
	if !ok.accepted || ok.err != nil || ok.reply.At != 2 || ok.reply.Done != 1 || ok.reply.Unit != "iteration" {
		t.Fatalf("set: accepted %v, err %v, reply %+v: want it applied after iteration 2", ok.accepted, ok.err, ok.reply)
	}
	for i, s := range stepsOf(w) {
		lr, kl := rlUnitLR, 0.04
		if s.Iteration >= 2 {
			lr, kl = 0.0005, 0.02
		}
		if s.Optim.LR != lr || s.Loss.KLBeta != kl {
			t.Errorf("step %d (iteration %d): lr %g, kl_beta %g; want %g, %g", i, s.Iteration, s.Optim.LR, s.Loss.KLBeta, lr, kl)
		}
	}
	for _, g := range w.of(rolloutapi.GenerateName) {
		in := g.in.(rolloutapi.GenerateInput)
		if want := map[bool]float64{false: 1, true: 0.7}[in.Iteration >= 2]; in.Temperature != want {
			t.Errorf("iteration %d sampled at temperature %g, want %g", in.Iteration, in.Temperature, want)
		}
	}
	logs := w.of(controlapi.LogName)
	if len(logs) != 1 {
		t.Fatalf("%d control logs, want 1", len(logs))
	}
	rec := logs[0].in.(controlapi.LogInput).Records
	if len(rec) != 1 || rec[0].Step != 2 || rec[0].Event != "set" || rec[0].Values["optimizer.lr"] != 0.0005 ||
		!strings.Contains(rec[0].Label, "optimizer.lr 0.001→0.0005") || rec[0].Phase != "grpo" {
		t.Errorf("control records %+v", rec)
	}
	if out.Metrics["iterations"] != 5 {
		t.Errorf("metrics %v", out.Metrics)
	}
}

// TestSteerUnitIterations: iterations extended, then shortened, take effect at their boundaries.
func TestSteerUnitIterations(t *testing.T) {
	for _, c := range []struct {
		set  string
		want float64
	}{{"iterations=6", 6}, {"iterations=2", 2}, {"max_seconds=1", 2}} {
		t.Run(c.set, func(t *testing.T) {
			w := newRLWorld(t, nil)
			r := w.update(rlIteration+5*time.Minute, workflows.UpdateSet, workflows.SteerRequest{Set: []string{c.set}})
			out, err := w.run(rlUnitConfig(t, ""))
			if err != nil || !r.accepted {
				t.Fatalf("%v (accepted %v, %v)", err, r.accepted, r.err)
			}
			if out.Metrics["iterations"] != c.want || len(stepsOf(w)) != int(c.want) {
				t.Errorf("%d steps, metrics %v: want %v iterations", len(stepsOf(w)), out.Metrics, c.want)
			}
		})
	}
}

// TestSteerUnitPause: a pause accepted during the first iteration holds the phase after it, with
// nothing in flight and no activity started until the resume; the run then makes the same
// activity inputs as a run nobody paused. A resume before the pause's boundary withdraws it.
func TestSteerUnitPause(t *testing.T) {
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			in := rlUnitConfig(t, fmt.Sprintf(`{"mode":%q,"rollout":{"shards":2}}`, mode))
			whole := newRLWorld(t, nil)
			if _, err := whole.run(in); err != nil {
				t.Fatal(err)
			}
			w := newRLWorld(t, nil)
			p := w.update(5*time.Minute, workflows.UpdatePause, workflows.SteerRequest{Note: "look at the curves"})
			again := w.update(6*time.Minute, workflows.UpdatePause, workflows.SteerRequest{})
			r := w.update(5*time.Hour, workflows.UpdateResume, workflows.SteerRequest{})
			if _, err := w.run(in); err != nil {
				t.Fatal(err)
			}
			if !p.accepted || p.reply.At != 1 || !r.accepted || r.err != nil || !again.rejected {
				t.Fatalf("pause %+v, second pause %+v, resume %+v", p, again, r)
			}
			logs := w.of(controlapi.LogName)
			if len(logs) != 2 {
				t.Fatalf("%d control logs, want pause and resume", len(logs))
			}
			paused, resumed := logs[0].end, logs[1].start
			if resumed < 5*time.Hour {
				t.Errorf("resume logged at %v, before the resume", resumed)
			}
			for _, c := range w.calls {
				if c.name != controlapi.LogName && c.start < resumed && (c.start >= paused || !c.done || c.end > logs[0].start) {
					t.Errorf("%s ran from %v to %v, while paused (%v to %v)", c.name, c.start, c.end, paused, resumed)
				}
			}
			for _, name := range []string{rolloutapi.GenerateName, trainapi.PolicyStepName} {
				if got, want := inputsOf(w.of(name)), inputsOf(whole.of(name)); !slices.Equal(got, want) {
					t.Errorf("%s inputs differ from the run nobody paused:\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
		})
	}
	t.Run("withdrawn", func(t *testing.T) {
		w := newRLWorld(t, nil)
		w.update(5*time.Minute, workflows.UpdatePause, workflows.SteerRequest{})
		r := w.update(6*time.Minute, workflows.UpdateResume, workflows.SteerRequest{})
		if _, err := w.run(rlUnitConfig(t, "")); err != nil {
			t.Fatal(err)
		}
		if !r.accepted || len(w.of(controlapi.LogName)) != 0 || !strings.Contains(r.reply.Message, "withdrawn") {
			t.Errorf("resume %+v; control logs %d: want the pause withdrawn, nothing logged", r, len(w.of(controlapi.LogName)))
		}
	})
}

// TestSteerUnitAt: a set asked to apply at a later boundary waits for it, also when it arrives
// with the phase's first workflow task (before the loop has set up its state); one behind the next
// boundary is refused.
func TestSteerUnitAt(t *testing.T) {
	w := newRLWorld(t, nil)
	late := w.update(0, workflows.UpdateSet, workflows.SteerRequest{Set: []string{"optimizer.lr=0.002"}, At: 3})
	past := w.update(rlIteration+5*time.Minute, workflows.UpdateSet, workflows.SteerRequest{Set: []string{"optimizer.lr=0.002"}, At: 1})
	if _, err := w.run(rlUnitConfig(t, "")); err != nil {
		t.Fatal(err)
	}
	if !late.accepted || late.reply.At != 3 || !past.rejected || !strings.Contains(past.err.Error(), "past it") {
		t.Fatalf("late %+v, past %+v", late, past)
	}
	for _, s := range stepsOf(w) {
		if want := map[bool]float64{false: rlUnitLR, true: 0.002}[s.Iteration >= 3]; s.Optim.LR != want {
			t.Errorf("iteration %d: lr %g, want %g", s.Iteration, s.Optim.LR, want)
		}
	}
}
