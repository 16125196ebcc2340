package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/control/controlapi"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/workflows"
)

// Workflow unit tests of gates between phases: the Pipeline workflow in the SDK's test environment
// with fake demo phases (each takes an hour of test clock and reports the metrics its name is
// given) and the control log recorded.

type gateWorld struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	started []string // phases started, in order
	from    map[string]string
	logs    []controlapi.Record
}

func newGateWorld(t *testing.T, metrics map[string]map[string]float64) *gateWorld {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	g := &gateWorld{t: t, env: suite.NewTestWorkflowEnvironment(), from: map[string]string{}}
	g.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "run"})
	g.env.RegisterWorkflowWithOptions(workflows.Pipeline, workflow.RegisterOptions{Name: workflows.PipelineName})
	g.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in workflows.PhaseInput) (workflows.PhaseOutput, error) {
		g.started = append(g.started, in.Phase)
		g.from[in.Phase] = in.From
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return workflows.PhaseOutput{}, err
		}
		return workflows.PhaseOutput{Checkpoint: "mem://" + in.Phase, Metrics: metrics[in.Phase]}, nil
	}, workflow.RegisterOptions{Name: "Demo"})
	g.env.RegisterActivityWithOptions(func(context.Context) (bool, error) { return false, nil },
		activity.RegisterOptions{Name: workflows.SearchAttributesName})
	g.env.RegisterActivityWithOptions(func(_ context.Context, in controlapi.LogInput) error {
		g.logs = append(g.logs, in.Records...)
		return nil
	}, activity.RegisterOptions{Name: controlapi.LogName})
	return g
}

func (g *gateWorld) update(at time.Duration, name string, req workflows.SteerRequest) *updateResult {
	res := &updateResult{}
	g.env.RegisterDelayedCallback(func() {
		updateSeq++
		g.env.UpdateWorkflow(name, fmt.Sprintf("%s-%d", name, updateSeq), &testsuite.TestUpdateCallback{
			OnAccept: func() { res.accepted = true },
			OnReject: func(err error) { res.rejected, res.err = true, err },
			OnComplete: func(v any, err error) {
				if r, ok := v.(workflows.SteerReply); ok {
					res.reply = r
				}
				if err != nil {
					res.err = err
				}
			},
		}, req)
	}, at)
	return res
}

func (g *gateWorld) run(gate *workflows.GateSpec) (workflows.PipelineOutput, error) {
	g.t.Helper()
	in := workflows.PipelineInput{Name: "gates", Store: "file:///tmp/temper-gate-test", Phases: []workflows.PhaseSpec{
		{Name: "a", Kind: "demo"}, {Name: "b", Kind: "demo", Gate: gate}, {Name: "c", Kind: "demo"},
	}}
	g.env.ExecuteWorkflow(workflows.PipelineName, in)
	if !g.env.IsWorkflowCompleted() {
		g.t.Fatal("pipeline did not complete")
	}
	var out workflows.PipelineOutput
	err := g.env.GetWorkflowError()
	if err == nil {
		err = g.env.GetWorkflowResult(&out)
	}
	return out, err
}

// TestGateUnitApproval: an approval gate holds the phase (approve and reject before it waits are
// refused) until approve, reject or the timeout; each decision is a control record of the gated
// phase, and the progress query shows the wait.
func TestGateUnitApproval(t *testing.T) {
	for _, c := range []struct {
		name     string
		gate     workflows.GateSpec
		decide   string // update sent at 3h ("": none)
		started  []string
		stopped  string
		event    string
		waitedTo time.Duration
	}{
		{"approve", workflows.GateSpec{Require: "approval"}, workflows.UpdateApprove, []string{"a", "b", "c"}, "", "approve", 3 * time.Hour},
		{"reject", workflows.GateSpec{Require: "approval"}, workflows.UpdateReject, []string{"a"}, "rejected by ann: too early", "reject", 3 * time.Hour},
		{"timeout-stop", workflows.GateSpec{Require: "approval", Timeout: dur(90 * time.Minute)}, "", []string{"a"}, "no decision within 1h30m0s", "timeout", 0},
		{"timeout-continue", workflows.GateSpec{Require: "approval", Timeout: dur(90 * time.Minute), OnTimeout: "continue"}, "", []string{"a", "b", "c"}, "", "timeout", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGateWorld(t, nil)
			early := g.update(30*time.Minute, workflows.UpdateApprove, workflows.SteerRequest{})
			var waiting *workflows.PipelineProgress
			g.env.RegisterDelayedCallback(func() {
				v, err := g.env.QueryWorkflow(workflows.ProgressQuery)
				if err == nil {
					waiting = new(workflows.PipelineProgress)
					err = v.Get(waiting)
				}
				if err != nil {
					t.Error(err)
				}
			}, 80*time.Minute)
			var d *updateResult
			if c.decide != "" {
				d = g.update(c.waitedTo, c.decide, workflows.SteerRequest{Note: "too early", By: "ann"})
			}
			out, err := g.run(&c.gate)
			if err != nil {
				t.Fatal(err)
			}
			if !early.rejected || !strings.Contains(early.err.Error(), "no gate is waiting") {
				t.Errorf("approve while phase a runs: %+v", early)
			}
			if waiting == nil || waiting.Waiting == nil || waiting.Waiting.Phase != "b" {
				t.Errorf("progress while waiting: %+v", waiting)
			}
			if d != nil && (!d.accepted || d.err != nil) {
				t.Errorf("%s: %+v", c.decide, d)
			}
			if strings.Join(g.started, ",") != strings.Join(c.started, ",") || !strings.Contains(out.Stopped, c.stopped) || (c.stopped == "") != (out.Stopped == "") {
				t.Errorf("started %v, stopped %q; want %v, %q", g.started, out.Stopped, c.started, c.stopped)
			}
			if len(g.logs) != 1 || g.logs[0].Event != c.event || g.logs[0].Phase != "b" || g.logs[0].Step != 0 {
				t.Errorf("control records %+v, want one %s of phase b", g.logs, c.event)
			}
		})
	}
}

// TestGateUnitWhen: a when: gate reads the previous phase's metrics (or PHASE.metric); false stops
// the pipeline with a result naming the metric, or skips the phase (the next starts from the
// checkpoint the skipped one would have); a metric the phase lacks fails the run naming it.
func TestGateUnitWhen(t *testing.T) {
	metrics := map[string]map[string]float64{"a": {"heldout_exact_match": 0.41, "steps": 10}}
	for _, c := range []struct {
		name     string
		gate     workflows.GateSpec
		started  []string
		stopped  string
		skipped  string
		failure  string
		fromOfC  string
		decision string
	}{
		{"pass", workflows.GateSpec{When: "heldout_exact_match >= 0.4 and steps == 10"}, []string{"a", "b", "c"}, "", "", "", "mem://b", "is true"},
		{"stop", workflows.GateSpec{When: "heldout_exact_match >= 0.6"}, []string{"a"}, "heldout_exact_match = 0.41", "", "", "", "is false"},
		{"skip", workflows.GateSpec{When: "a.heldout_exact_match >= 0.6 or not (steps < 20)", Else: "skip"}, []string{"a", "c"}, "", "heldout_exact_match = 0.41", "", "mem://a", "is false"},
		{"missing", workflows.GateSpec{When: "heldout_exact_matc >= 0.6"}, []string{"a"}, "", "", `no metric "heldout_exact_matc"`, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGateWorld(t, metrics)
			out, err := g.run(&c.gate)
			if c.failure != "" {
				if err == nil || !strings.Contains(err.Error(), c.failure) || !strings.Contains(err.Error(), "heldout_exact_match") {
					t.Fatalf("error %v, want one naming %s and the metrics there are", err, c.failure)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(g.started, ",") != strings.Join(c.started, ",") || !strings.Contains(out.Stopped, c.stopped) || (c.stopped == "") != (out.Stopped == "") {
				t.Errorf("started %v, stopped %q; want %v, %q", g.started, out.Stopped, c.started, c.stopped)
			}
			if c.skipped != "" && (len(out.Phases) != 3 || !strings.Contains(out.Phases[1].Skipped, c.skipped) || out.Phases[1].Checkpoint != "mem://a") {
				t.Errorf("phases %+v: want b skipped, passing on a's checkpoint", out.Phases)
			}
			if g.from["c"] != c.fromOfC {
				t.Errorf("c started from %q, want %q", g.from["c"], c.fromOfC)
			}
			if len(g.logs) != 1 || g.logs[0].Event != "gate" || !strings.Contains(g.logs[0].Label, c.decision) {
				t.Errorf("control records %+v", g.logs)
			}
		})
	}
}

// TestGateValidate: gates are checked with the pipeline, naming the field and what is allowed.
func TestGateValidate(t *testing.T) {
	for _, c := range []struct {
		phase int
		gate  string
		want  string
	}{
		{1, `{"require":"vote"}`, `phases[1].gate.require: "vote": allowed values: approval`},
		{1, `{}`, "phases[1].gate: a gate needs require: approval, or a when: condition"},
		{1, `{"when":"x >= "}`, `phases[1].gate.when: "x >= ": at 5: want a number or a metric name, got the end`},
		{1, `{"when":"x = 1"}`, "compare with =="},
		{1, `{"when":"nope.x > 1"}`, "nope.x names no earlier phase"},
		{1, `{"when":"x > 1","else":"retry"}`, `phases[1].gate.else: "retry": allowed values: stop, skip`},
		{1, `{"when":"x > 1","timeout":"1h"}`, "timeout and on_timeout belong to require: approval"},
		{1, `{"require":"approval","on_timeout":"wait"}`, `"wait": allowed values: stop, continue`},
		{0, `{"when":"x > 1"}`, "the first phase has no previous phase"},
		{0, `{"require":"approval","timeout":"48h","on_timeout":"continue"}`, ""},
		{1, `{"when":"a.x > 1 and (y <= -2.5e-3 || !(z != 0))","else":"skip"}`, ""},
	} {
		var gate workflows.GateSpec
		if err := json.Unmarshal([]byte(c.gate), &gate); err != nil {
			t.Fatal(err)
		}
		in := workflows.PipelineInput{Phases: []workflows.PhaseSpec{{Name: "a", Kind: "demo"}, {Name: "b", Kind: "demo"}}}
		in.Phases[c.phase].Gate = &gate
		err := in.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("gate %s on phase %d: %v, want %q", c.gate, c.phase, err, c.want)
		}
	}
}

func dur(d time.Duration) config.Duration { return config.Duration(d) }
