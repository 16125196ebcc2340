package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// pipelineRun is one execution of a pipeline (a run between two continue-as-new): its input, its
// loop state, what its progress query shows, and what steering needs: the phase running now (set,
// pause and resume go on to it) and the gate waiting for a decision.
type pipelineRun struct {
	ctx      workflow.Context
	in       PipelineInput
	runID    string
	state    PipelineState
	progress PipelineProgress
	search   bool
	running  *PhaseSpec // the phase whose child workflow runs now
	childID  string
	waiting  *GateWait
	decision *gateDecision
}

// newPipelineRun validates the input, finds the store, registers the query and the Updates, asks
// whether search attributes exist and shows the run's identity (and lineage, for a fork).
func newPipelineRun(ctx workflow.Context, in PipelineInput) (*pipelineRun, error) {
	runID := workflow.GetInfo(ctx).WorkflowExecution.ID
	if err := in.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("pipeline: invalid input: "+err.Error(), "InvalidConfig", err)
	}
	if in.Store == "" {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
		if err := workflow.ExecuteLocalActivity(lctx, DefaultStoreName).Get(ctx, &in.Store); err != nil {
			return nil, fmt.Errorf("pipeline %s: default store: %w", runID, err)
		}
	}
	p := &pipelineRun{ctx: ctx, in: in, runID: runID}
	if in.State != nil {
		p.state = *in.State
	}
	p.progress = PipelineProgress{Total: len(in.Phases), Done: p.state.Results, StartedAt: workflow.Now(ctx), Parent: in.Parent}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (PipelineProgress, error) { return p.progress, nil }); err != nil {
		return nil, err
	}
	if err := p.registerUpdates(); err != nil {
		return nil, err
	}
	p.search = searchEnabled(ctx)
	if err := upsertSearch(ctx, p.search, SARun.ValueSet(runID), SAKind.ValueSet(KindPipeline)); err != nil {
		return nil, err
	}
	if in.Parent != nil && in.State == nil {
		if err := p.showLineage(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// phase runs phase i after its gate; end says the pipeline's result is out (a gate stopped it, or
// it continues as new).
func (p *pipelineRun) phase(i int) (out PipelineOutput, end bool, err error) {
	ctx, spec := p.ctx, p.in.Phases[i]
	if spec.Gate != nil {
		action, reason, err := p.passGate(i)
		switch {
		case err != nil:
			return PipelineOutput{}, true, err
		case action == gateStop:
			workflow.GetLogger(ctx).Info("pipeline stopped at a gate", "phase", spec.Name, "reason", reason)
			return p.output(reason), true, workflow.UpsertMemo(ctx, map[string]any{"stopped": reason})
		case action == gateSkip:
			p.state.Results = append(p.state.Results, PhaseResult{Name: spec.Name, Kind: spec.Kind,
				Checkpoint: resolveFrom(spec, i, p.state.Results), Skipped: reason})
			p.state.Next, p.progress.Done = i+1, p.state.Results
			return PipelineOutput{}, false, nil
		}
	}
	r, err := p.runPhase(i)
	if err != nil {
		return PipelineOutput{}, true, err
	}
	p.state.Results = append(p.state.Results, r)
	p.state.Next = i + 1
	p.progress.Done = p.state.Results
	if err := upsertSearch(ctx, p.search, evalUpdates(r.Metrics)...); err != nil {
		return PipelineOutput{}, true, err
	}
	if p.state.Next < len(p.in.Phases) && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		next := p.in
		next.State = &p.state
		workflow.GetLogger(ctx).Info("continuing as new", "next_phase", p.in.Phases[p.state.Next].Name)
		return PipelineOutput{}, true, workflow.NewContinueAsNewError(ctx, PipelineName, next)
	}
	return PipelineOutput{}, false, nil
}

// runPhase runs phase i as its child workflow RUN.PHASE and returns its result.
func (p *pipelineRun) runPhase(i int) (PhaseResult, error) {
	ctx, spec, runID := p.ctx, p.in.Phases[i], p.runID
	kind, _ := LookupPhase(spec.Kind) // validated above
	from := resolveFrom(spec, i, p.state.Results)
	fromData, err := phaseFromData(runID, spec, p.state.Results)
	if err != nil {
		return PhaseResult{}, err
	}
	childID := runID + "." + spec.Name
	p.progress.Phase, p.progress.Kind, p.progress.Index, p.progress.ChildID = spec.Name, spec.Kind, i, childID
	if err := workflow.UpsertMemo(ctx, map[string]any{"phase": spec.Name, "phase_kind": spec.Kind, "phase_index": i}); err != nil {
		return PhaseResult{}, err
	}
	if err := upsertSearch(ctx, p.search, SAPhase.ValueSet(spec.Name)); err != nil {
		return PhaseResult{}, err
	}
	workflow.GetLogger(ctx).Info("phase starting", "phase", spec.Name, "kind", spec.Kind, "from", from)
	started := workflow.Now(ctx)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: childID,
		TaskQueue:  QueueTemper,
		Memo:       map[string]any{"run": runID, "phase": spec.Name, "phase_kind": spec.Kind},
	})
	p.running, p.childID = &spec, childID
	var out PhaseOutput
	err = workflow.ExecuteChildWorkflow(cctx, kind.WorkflowName, PhaseInput{
		RunID: runID, Phase: spec.Name, Kind: spec.Kind, Store: p.in.Store, Seed: p.in.Seed, From: from, Config: spec.Config,
		Search: p.search, Earlier: earlierCheckpoints(p.state.Results), FromData: fromData,
	}).Get(ctx, &out)
	p.running, p.childID = nil, ""
	if err != nil {
		return PhaseResult{}, fmt.Errorf("pipeline %s: phase %s (%s): %w", runID, spec.Name, spec.Kind, err)
	}
	return PhaseResult{
		Name: spec.Name, Kind: spec.Kind, WorkflowID: childID, Checkpoint: out.Checkpoint, Metrics: out.Metrics, Curve: out.Curve, Data: out.Data,
		Seconds: workflow.Now(ctx).Sub(started).Seconds(),
	}, nil
}

// output is the pipeline's result; stopped says why a gate ended it early ("": it ran through).
func (p *pipelineRun) output(stopped string) PipelineOutput {
	var total float64
	for _, r := range p.state.Results {
		total += r.Seconds
	}
	return PipelineOutput{RunID: p.runID, Phases: p.state.Results, Seconds: total, Stopped: stopped}
}

// showLineage records where a forked run comes from: TemperParent, the memo, and a fork record at
// the start of its first phase's metrics log.
func (p *pipelineRun) showLineage() error {
	l := p.in.Parent
	workflow.GetVersion(p.ctx, versionSteer, workflow.DefaultVersion, 1)
	if err := upsertSearch(p.ctx, p.search, SAParent.ValueSet(l.Run)); err != nil {
		return err
	}
	at := fmt.Sprintf("%s@%d", l.Phase, l.Step)
	if l.Step < 0 {
		at = l.Phase + " (its start)"
	}
	if err := workflow.UpsertMemo(p.ctx, map[string]any{"parent": l.Run, "parent_at": at}); err != nil {
		return err
	}
	note := fmt.Sprintf("forked from %s at %s", l.Run, at)
	for _, s := range l.Set {
		note += " " + s
	}
	return p.logControl(p.in.Phases[0].Name, ControlEvent{Event: EventFork, Note: note})
}

// registerUpdates installs set, pause and resume (forwarded to the running phase) and approve and
// reject (decided here). Validators refuse before anything is written to the history.
func (p *pipelineRun) registerUpdates() error {
	for _, h := range []struct {
		name     string
		handler  any
		validate any
	}{
		{UpdateSet, p.forward(UpdateSet), p.validateForward(UpdateSet)},
		{UpdatePause, p.forward(UpdatePause), p.validateForward(UpdatePause)},
		{UpdateResume, p.forward(UpdateResume), p.validateForward(UpdateResume)},
		{UpdateApprove, p.decide(true), p.validateDecision},
		{UpdateReject, p.decide(false), p.validateDecision},
	} {
		if err := workflow.SetUpdateHandlerWithOptions(p.ctx, h.name, h.handler, workflow.UpdateHandlerOptions{Validator: h.validate}); err != nil {
			return err
		}
	}
	return nil
}

// validateForward refuses what the running phase could not take: no phase running, another phase
// named, a kind that does not steer, and (set) a field that is not live or a value out of range.
func (p *pipelineRun) validateForward(name string) func(workflow.Context, SteerRequest) error {
	return func(_ workflow.Context, req SteerRequest) error {
		if p.running == nil {
			if p.waiting != nil {
				return fmt.Errorf("no phase is running: the pipeline waits at the gate before phase %s (temper approve or reject)", p.waiting.Phase)
			}
			return fmt.Errorf("no phase is running")
		}
		if req.Phase != "" && req.Phase != p.running.Name {
			if p.result(req.Phase) != nil {
				return fmt.Errorf("phase %s has finished (running: %s); fork the run to try it with other settings", req.Phase, p.running.Name)
			}
			return fmt.Errorf("phase %q is not running (running: %s)", req.Phase, p.running.Name)
		}
		if fields, _ := liveFields(p.running.Kind); len(fields) == 0 {
			return fmt.Errorf("a %s phase takes no live changes and does not pause (the RL and chunked training kinds do)", p.running.Kind)
		}
		if name != UpdateSet {
			return nil
		}
		_, _, err := changePlan(p.running.Name, p.running.Kind, p.running.Config, nil, req.Set, -1)
		return err
	}
}

// forward sends the Update on to the running phase workflow (its newest branch, if it branched)
// and returns its reply; the phase's own validator has the last word.
func (p *pipelineRun) forward(name string) func(workflow.Context, SteerRequest) (SteerReply, error) {
	return func(ctx workflow.Context, req SteerRequest) (SteerReply, error) {
		req.Phase = p.running.Name
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 2 * time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var reply SteerReply
		err := workflow.ExecuteLocalActivity(lctx, ForwardName, ForwardInput{Workflow: p.childID, Update: name, Request: req}).Get(ctx, &reply)
		return reply, err
	}
}

func (p *pipelineRun) validateDecision(_ workflow.Context, _ SteerRequest) error {
	switch {
	case p.waiting == nil && p.running != nil:
		return fmt.Errorf("no gate is waiting (phase %s is running)", p.running.Name)
	case p.waiting == nil:
		return fmt.Errorf("no gate is waiting")
	case p.decision != nil:
		return fmt.Errorf("the gate before phase %s is already decided", p.waiting.Phase)
	}
	return nil
}

// decide records an approve (or reject) of the waiting gate; the pipeline acts on it.
func (p *pipelineRun) decide(approve bool) func(workflow.Context, SteerRequest) (SteerReply, error) {
	return func(ctx workflow.Context, req SteerRequest) (SteerReply, error) {
		phase := p.waiting.Phase
		p.decision = &gateDecision{approve: approve, note: req.Note, by: req.By, accepted: workflow.Now(ctx)}
		msg := fmt.Sprintf("approved: phase %s starts", phase)
		if !approve {
			msg = fmt.Sprintf("rejected: the pipeline stops before phase %s", phase)
		}
		return SteerReply{Workflow: p.runID, Phase: phase, Message: msg}, nil
	}
}
