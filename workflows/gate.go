package workflows

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/control/controlapi"
	"github.com/temperml/temper/internal/config"
)

// GateSpec holds a phase until someone approves it (require: approval) or a condition on the
// previous phase's metrics holds (when); with both, the condition is checked first.
type GateSpec struct {
	Require   string          `json:"require,omitempty" help:"approval: the phase starts only after temper approve RUN (temper reject RUN stops the pipeline)"`
	Timeout   config.Duration `json:"timeout,omitempty" default:"0s" help:"approval: how long to wait (0: no limit)"`
	OnTimeout string          `json:"on_timeout,omitempty" default:"stop" help:"approval: when the wait runs out: stop (the pipeline ends here) | continue"`
	When      string          `json:"when,omitempty" help:"a condition on the previous phase's metrics, e.g. \"heldout_exact_match >= 0.6\": <, <=, >, >=, ==, != between metrics and numbers, joined by and, or, not and parentheses; PHASE.metric reads an earlier phase's"`
	Else      string          `json:"else,omitempty" default:"stop" help:"when the condition is false: stop (the pipeline ends; its result names the metric) | skip (the phase is skipped and the next starts from the same checkpoint)"`
}

// RequireApproval is GateSpec.Require's one value.
const RequireApproval = "approval"

// validate checks the gate of phases[i]; earlier names the phases before it.
func (g *GateSpec) validate(path string, i int, earlier map[string]int) error {
	switch {
	case g.Require != "" && g.Require != RequireApproval:
		return &config.FieldError{Path: path + ".require", Msg: fmt.Sprintf("%q: allowed values: approval", g.Require)}
	case g.Require == "" && g.When == "":
		return &config.FieldError{Path: path, Msg: "a gate needs require: approval, or a when: condition"}
	case g.Require == "" && (g.Timeout != 0 || g.OnTimeout != ""):
		return &config.FieldError{Path: path + ".timeout", Msg: "timeout and on_timeout belong to require: approval"}
	case g.Timeout < 0:
		return &config.FieldError{Path: path + ".timeout", Msg: "must be >= 0 (0: no limit)"}
	case g.OnTimeout != "" && g.OnTimeout != "stop" && g.OnTimeout != "continue":
		return &config.FieldError{Path: path + ".on_timeout", Msg: fmt.Sprintf("%q: allowed values: stop, continue", g.OnTimeout)}
	case g.Else != "" && g.When == "":
		return &config.FieldError{Path: path + ".else", Msg: "else belongs to a when: condition"}
	case g.Else != "" && g.Else != "stop" && g.Else != "skip":
		return &config.FieldError{Path: path + ".else", Msg: fmt.Sprintf("%q: allowed values: stop, skip", g.Else)}
	case g.When == "":
		return nil
	case i == 0:
		return &config.FieldError{Path: path + ".when", Msg: "the first phase has no previous phase whose metrics a condition could read"}
	}
	c, err := parseCondition(g.When)
	if err != nil {
		return &config.FieldError{Path: path + ".when", Msg: fmt.Sprintf("%q: %v", g.When, err)}
	}
	for _, m := range c.metrics(nil) {
		if phase, _, ok := strings.Cut(m, "."); ok {
			if _, seen := earlier[phase]; !seen {
				return &config.FieldError{Path: path + ".when", Msg: fmt.Sprintf("%q: %s names no earlier phase", g.When, m)}
			}
		}
	}
	return nil
}

// GateWait is a gate waiting for approval (PipelineProgress.Waiting).
type GateWait struct {
	Phase     string    `json:"phase"` // the phase it holds
	Require   string    `json:"require"`
	Since     time.Time `json:"since"`
	Timeout   float64   `json:"timeout_seconds,omitempty"`
	OnTimeout string    `json:"on_timeout,omitempty"`
}

// gateDecision is an approve or reject that arrived for the waiting gate.
type gateDecision struct {
	approve  bool
	note, by string
	accepted time.Time
}

// gate actions: the phase runs, the pipeline stops, or the phase is skipped.
const (
	gateGo   = "go"
	gateStop = "stop"
	gateSkip = "skip"
)

// passGate decides phase i's gate: its condition, then its approval. It returns the action and,
// for stop and skip, why; each decision is a control record in the phase's metrics log.
func (p *pipelineRun) passGate(i int) (action, reason string, err error) {
	spec := p.in.Phases[i]
	g := spec.Gate
	workflow.GetVersion(p.ctx, versionSteer, workflow.DefaultVersion, 1)
	if g.When != "" {
		ok, why, err := p.judge(spec)
		if err != nil {
			return "", "", err
		}
		if err := p.logControl(spec.Name, ControlEvent{Event: EventGate, Note: why}); err != nil {
			return "", "", err
		}
		if !ok {
			action := g.Else
			if action == "" {
				action = gateStop
			}
			return action, fmt.Sprintf("gate before phase %s: %s", spec.Name, why), nil
		}
	}
	if g.Require != RequireApproval {
		return gateGo, "", nil
	}
	return p.awaitApproval(spec)
}

// judge evaluates the gate's condition on the finished phases' metrics; a metric the phase does
// not report fails the pipeline, naming it and the metrics there are.
func (p *pipelineRun) judge(spec PhaseSpec) (ok bool, why string, err error) {
	c, _ := parseCondition(spec.Gate.When) // validated
	prev := p.lastRan()
	vals := map[string]float64{}
	var shown []string
	for _, m := range c.metrics(nil) {
		from, metric := prev, m
		if phase, name, dotted := strings.Cut(m, "."); dotted {
			from, metric = p.result(phase), name
		}
		if from == nil {
			err := fmt.Errorf("pipeline %s: gate before phase %s: when %q: no earlier phase ran to read %s from", p.runID, spec.Name, spec.Gate.When, m)
			return false, "", temporal.NewNonRetryableApplicationError(err.Error(), "GateMetric", err)
		}
		v, found := from.Metrics[metric]
		if !found {
			err := fmt.Errorf("pipeline %s: gate before phase %s: when %q: phase %s has no metric %q (it has: %s)",
				p.runID, spec.Name, spec.Gate.When, from.Name, metric, strings.Join(sortedMetricNames(from.Metrics), ", "))
			return false, "", temporal.NewNonRetryableApplicationError(err.Error(), "GateMetric", err)
		}
		vals[m] = v
		shown = append(shown, fmt.Sprintf("%s = %.6g (phase %s)", m, v, from.Name))
	}
	ok = c.eval(vals)
	return ok, fmt.Sprintf("when %q is %v: %s", spec.Gate.When, ok, strings.Join(shown, ", ")), nil
}

// lastRan is the result of the last phase that ran (skipped ones pass their input on).
func (p *pipelineRun) lastRan() *PhaseResult {
	for j := len(p.state.Results) - 1; j >= 0; j-- {
		if p.state.Results[j].Skipped == "" {
			return &p.state.Results[j]
		}
	}
	return nil
}

func (p *pipelineRun) result(name string) *PhaseResult {
	for j := range p.state.Results {
		if r := &p.state.Results[j]; r.Name == name && r.Skipped == "" {
			return r
		}
	}
	return nil
}

func sortedMetricNames(m map[string]float64) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// awaitApproval waits for temper approve or reject (or the timeout) with the pipeline showing it
// waits (progress query, memo, TemperWaiting).
func (p *pipelineRun) awaitApproval(spec PhaseSpec) (action, reason string, err error) {
	g := spec.Gate
	p.waiting = &GateWait{Phase: spec.Name, Require: g.Require, Since: workflow.Now(p.ctx), Timeout: g.Timeout.D().Seconds(), OnTimeout: g.OnTimeout}
	p.progress.Waiting = p.waiting
	if err := p.showWaiting(fmt.Sprintf("approval before phase %s", spec.Name), SAWaiting.ValueSet(WaitingApproval)); err != nil {
		return "", "", err
	}
	decided := func() bool { return p.decision != nil }
	timedOut := false
	if g.Timeout > 0 {
		ok, err := workflow.AwaitWithTimeout(p.ctx, g.Timeout.D(), decided)
		if err != nil {
			return "", "", err
		}
		timedOut = !ok
	} else if err := workflow.Await(p.ctx, decided); err != nil {
		return "", "", err
	}
	d := p.decision
	p.waiting, p.progress.Waiting, p.decision = nil, nil, nil
	if err := p.showWaiting("", SAWaiting.ValueUnset()); err != nil {
		return "", "", err
	}
	switch {
	case timedOut:
		action := gateStop
		if g.OnTimeout == "continue" {
			action = gateGo
		}
		note := fmt.Sprintf("no decision within %s: %s", g.Timeout.D(), action)
		return action, fmt.Sprintf("gate before phase %s: %s", spec.Name, note), p.logControl(spec.Name, ControlEvent{Event: EventTimeout, Note: note})
	case d.approve:
		return gateGo, "", p.logControl(spec.Name, ControlEvent{Event: EventApprove, Note: d.note, By: d.by, Accepted: d.accepted})
	}
	why := fmt.Sprintf("gate before phase %s: rejected", spec.Name)
	if d.by != "" {
		why += " by " + d.by
	}
	if d.note != "" {
		why += ": " + d.note
	}
	return gateStop, why, p.logControl(spec.Name, ControlEvent{Event: EventReject, Note: d.note, By: d.by, Accepted: d.accepted})
}

// showWaiting puts what the pipeline waits for in its memo ("" clears it) and search attributes.
func (p *pipelineRun) showWaiting(what string, wait temporal.SearchAttributeUpdate) error {
	if err := workflow.UpsertMemo(p.ctx, map[string]any{"waiting": what}); err != nil {
		return err
	}
	return upsertSearch(p.ctx, p.search, wait)
}

// logControl writes a pipeline-level control event (a gate's decision, a fork) to phase's
// metrics log, at step 0: before the phase's first step.
func (p *pipelineRun) logControl(phase string, ev ControlEvent) error {
	p.state.Controls++
	now := workflow.Now(p.ctx)
	ev.Seq, ev.Applied = p.state.Controls, &now
	if ev.Accepted.IsZero() {
		ev.Accepted = now
	}
	p.state.Log = append(p.state.Log, ev)
	_, short := trainerContexts(p.ctx, 30*time.Second)
	rec := controlapi.Record{Run: p.runID, Phase: phase, Step: 0, Seq: ev.Seq, Time: unixSeconds(now), Event: ev.Event, Label: ev.Label(), Note: ev.Note}
	if err := workflow.ExecuteActivity(short, controlapi.LogName, controlapi.LogInput{Store: p.in.Store, Records: []controlapi.Record{rec}}).Get(p.ctx, nil); err != nil {
		return fmt.Errorf("pipeline %s: control log: %w", p.runID, err)
	}
	return nil
}
