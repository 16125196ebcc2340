package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/control/controlapi"
)

// steering is one phase run's live control (steer.go): its Update handlers and Query, and what
// its loop does at each boundary. The loop calls boundary(c) where c iterations or steps are done
// and the next has not started, then sets next to the boundary that ends what it starts. Handlers
// only record a request; the loop applies it, so a change never lands inside an activity.
type steering struct {
	ctx  workflow.Context
	in   PhaseInput
	st   *SteerState // in the loop state: across continue-as-new and into back-tracking branches
	unit string
	done func() int // iterations or steps completed
	next int        // the boundary a request accepted now applies at
	// grid rounds a requested boundary up to one the loop reaches (chunks end every chunk_steps).
	grid func(at int) int
	// elsewhere is the branch child that runs the rest of the phase while this run waits for it.
	elsewhere string
	logCtx    workflow.Context  // the control log's activity (trainer queue)
	dir       func() string     // the phase directory of the metrics log
	attach    func(*SteerState) // puts st into the loop state (it holds none until someone steers)
	resume    bool              // a resume arrived while paused
	finishing bool              // the loop is done: no boundary is left
}

// newSteering registers the handlers of a phase run whose loop state holds st (nil: none yet).
func newSteering(ctx workflow.Context, in PhaseInput, st *SteerState, unit string, done func() int, logCtx workflow.Context,
	dir func() string, attach func(*SteerState)) (*steering, error) {
	if st == nil {
		st = &SteerState{}
	}
	s := &steering{ctx: ctx, in: in, st: st, unit: unit, done: done, next: done(), grid: func(at int) int { return at },
		logCtx: logCtx, dir: dir, attach: attach}
	for _, h := range []struct {
		name     string
		handler  any
		validate any
	}{
		{UpdateSet, s.set, s.validateSet},
		{UpdatePause, s.pause, s.validatePause},
		{UpdateResume, s.resumeRun, s.validateResume},
	} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, h.name, h.handler, workflow.UpdateHandlerOptions{Validator: h.validate}); err != nil {
			return nil, err
		}
	}
	return s, workflow.SetQueryHandler(ctx, SteerQuery, s.status)
}

// validateRequest checks what every request must: the right phase, this run not waiting on a
// branch, and a boundary not behind the next; it returns the boundary the request applies at.
func (s *steering) validateRequest(req SteerRequest) (int, error) {
	switch {
	case req.Phase != "" && req.Phase != s.in.Phase:
		return 0, fmt.Errorf("this is phase %s, not %s", s.in.Phase, req.Phase)
	case s.elsewhere != "":
		return 0, fmt.Errorf("phase %s continues in its back-tracking branch %s: steer that workflow", s.in.Phase, s.elsewhere)
	case s.finishing:
		return 0, fmt.Errorf("phase %s is finishing: it has no boundary left", s.in.Phase)
	case req.At < 0:
		return 0, fmt.Errorf("at %d: want a boundary >= %d", req.At, s.next)
	case req.At > 0 && req.At < s.next:
		return 0, fmt.Errorf("at %d: the phase is past it; the next boundary is after %s %d", req.At, s.unit, s.next)
	}
	if req.At > 0 {
		return s.grid(req.At), nil
	}
	return s.next, nil
}

func (s *steering) validateSet(_ workflow.Context, req SteerRequest) error {
	_, _, err := s.planSet(req)
	return err
}

// planSet resolves a set against what is applied and pending.
func (s *steering) planSet(req SteerRequest) (int, ControlEvent, error) {
	at, err := s.validateRequest(req)
	if err != nil {
		return 0, ControlEvent{}, err
	}
	before := append([]Assignment{}, s.st.Applied...)
	for _, p := range s.st.Pending {
		before = append(before, p.Set...)
	}
	as, changes, err := changePlan(s.in.Phase, s.in.Kind, s.in.Config, before, req.Set, at)
	if err != nil {
		return 0, ControlEvent{}, err
	}
	return at, ControlEvent{Event: EventSet, At: at, Set: as, Changes: changes, Note: req.Note, By: req.By}, nil
}

func (s *steering) set(ctx workflow.Context, req SteerRequest) (SteerReply, error) {
	at, ev, err := s.planSet(req)
	if err != nil {
		return SteerReply{}, err
	}
	s.accept(ctx, ev)
	return s.reply(ctx, at, ev.Changes, fmt.Sprintf("%s from %s %d on", ev.Label(), s.unit, at+1)), nil
}

// accept numbers an event and queues it for its boundary.
func (s *steering) accept(ctx workflow.Context, ev ControlEvent) {
	s.st.Seq++
	ev.Seq, ev.Accepted = s.st.Seq, workflow.Now(ctx)
	s.st.Pending = append(s.st.Pending, ev)
	s.attach(s.st)
}

func (s *steering) reply(ctx workflow.Context, at int, changes []Change, msg string) SteerReply {
	return SteerReply{Workflow: workflow.GetInfo(ctx).WorkflowExecution.ID, Phase: s.in.Phase, Unit: s.unit, Done: s.done(), At: at,
		Changes: changes, Message: fmt.Sprintf("%s: %s (%d done; applies after %s %d)", s.in.Phase, msg, s.done(), s.unit, at)}
}

func (s *steering) pausing() bool {
	for _, p := range s.st.Pending {
		if p.Event == EventPause {
			return true
		}
	}
	return s.st.Paused != nil
}

func (s *steering) validatePause(_ workflow.Context, req SteerRequest) error {
	if _, err := s.validateRequest(req); err != nil {
		return err
	}
	if p := s.st.Paused; p != nil {
		return fmt.Errorf("phase %s is already paused after %s %d since %s", s.in.Phase, s.unit, p.At, p.Since.UTC().Format(time.RFC3339))
	}
	if s.pausing() {
		return fmt.Errorf("phase %s already pauses at its next boundary", s.in.Phase)
	}
	return nil
}

func (s *steering) pause(ctx workflow.Context, req SteerRequest) (SteerReply, error) {
	at, err := s.validateRequest(req)
	if err != nil {
		return SteerReply{}, err
	}
	s.accept(ctx, ControlEvent{Event: EventPause, At: at, Note: req.Note, By: req.By})
	return s.reply(ctx, at, nil, fmt.Sprintf("pauses after %s %d, once its checkpoint is committed", s.unit, at)), nil
}

func (s *steering) validateResume(_ workflow.Context, req SteerRequest) error {
	if req.Phase != "" && req.Phase != s.in.Phase {
		return fmt.Errorf("this is phase %s, not %s", s.in.Phase, req.Phase)
	}
	if !s.pausing() || s.resume {
		return fmt.Errorf("phase %s is not paused", s.in.Phase)
	}
	return nil
}

// resumeRun lets a paused phase go on, or withdraws a pause that has not reached its boundary.
func (s *steering) resumeRun(ctx workflow.Context, req SteerRequest) (SteerReply, error) {
	if s.st.Paused == nil {
		for i, p := range s.st.Pending {
			if p.Event == EventPause {
				s.st.Pending = append(s.st.Pending[:i:i], s.st.Pending[i+1:]...)
				break
			}
		}
		return s.reply(ctx, s.next, nil, "the pause it had not reached yet is withdrawn"), nil
	}
	at := s.st.Paused.At
	s.accept(ctx, ControlEvent{Event: EventResume, At: at, Note: req.Note, By: req.By})
	s.resume = true
	return s.reply(ctx, at, nil, "resumes"), nil
}

// status answers SteerQuery.
func (s *steering) status() (SteerStatus, error) {
	st := SteerStatus{Workflow: workflow.GetInfo(s.ctx).WorkflowExecution.ID, Phase: s.in.Phase, Kind: s.in.Kind, Unit: s.unit,
		Done: s.done(), Next: s.next, Elsewhere: s.elsewhere, Paused: s.st.Paused, Pending: s.st.Pending, Log: s.st.Log}
	if tree, err := effectiveConfig(s.in.Phase, s.in.Kind, s.in.Config, s.st.Applied); err == nil {
		st.Live = liveValues(s.in.Kind, tree)
	}
	return st, nil
}

// boundary applies what is due at boundary c (after c iterations or steps): changes join the
// effective config, each event goes to the metrics log; a pause then parks the loop (park settles
// the work in flight) until a resume arrives, and what arrived meanwhile is applied before it goes
// on. changed says the config changed: the loop decodes it again. Nothing due: nothing recorded.
func (s *steering) boundary(c int, park func() error) (changed bool, err error) {
	for {
		due := s.due(c)
		if len(due) == 0 && s.st.Paused == nil {
			return changed, nil
		}
		workflow.GetVersion(s.ctx, versionSteer, workflow.DefaultVersion, 1)
		if len(due) > 0 {
			if s.st.Paused == nil && slices.ContainsFunc(due, func(e ControlEvent) bool { return e.Event == EventPause }) {
				if err := park(); err != nil { // settled before the pause is logged: nothing runs past it
					return changed, err
				}
			}
			ch, err := s.apply(c, due)
			if err != nil {
				return changed, err
			}
			changed = changed || ch
			continue
		}
		if err := s.showPaused(true); err != nil {
			return changed, err
		}
		if err := workflow.Await(s.ctx, func() bool { return s.resume }); err != nil {
			return changed, err
		}
		s.resume = false
		if err := s.showPaused(false); err != nil {
			return changed, err
		}
	}
}

// due takes the pending events whose boundary is c or before, in the order they were accepted.
func (s *steering) due(c int) []ControlEvent {
	var due, rest []ControlEvent
	for _, p := range s.st.Pending {
		if p.At <= c {
			due = append(due, p)
		} else {
			rest = append(rest, p)
		}
	}
	if len(due) > 0 {
		s.st.Pending = rest
	}
	return due
}

// apply makes due events take effect at boundary c and writes them to the metrics log.
func (s *steering) apply(c int, due []ControlEvent) (changed bool, err error) {
	now := workflow.Now(s.ctx)
	var recs []controlapi.Record
	for _, ev := range due {
		ev.At, ev.Applied = c, &now
		switch ev.Event {
		case EventSet:
			s.st.Applied = append(s.st.Applied, ev.Set...)
			changed = true
		case EventPause:
			s.st.Paused = &PauseState{At: c, Since: now, Note: ev.Note, By: ev.By}
		case EventResume:
			s.st.Paused = nil
		}
		s.st.Log = append(s.st.Log, ev)
		values := map[string]float64{}
		for _, a := range ev.Set {
			values[a.Key] = a.Value
		}
		recs = append(recs, controlapi.Record{Run: s.in.RunID, Phase: s.dir(), Step: c, Seq: ev.Seq, Time: unixSeconds(now),
			Event: ev.Event, Label: ev.Label(), Note: ev.Note, Values: values})
	}
	workflow.GetLogger(s.ctx).Info("steering applied", "phase", s.in.Phase, "after", c, "events", len(due))
	if err := workflow.ExecuteActivity(s.logCtx, controlapi.LogName, controlapi.LogInput{Store: s.in.Store, Records: recs}).Get(s.ctx, nil); err != nil {
		return changed, fmt.Errorf("%s %s: control log: %w", s.in.Kind, s.in.Phase, err)
	}
	last := s.st.Log[len(s.st.Log)-1]
	return changed, workflow.UpsertMemo(s.ctx, map[string]any{"controls": len(s.st.Log), "last_control": last.Label()})
}

// showPaused shows (or clears) the pause in the memo and TemperWaiting.
func (s *steering) showPaused(paused bool) error {
	memo := map[string]any{"paused": ""} // a memo key stays; empty says "not paused"
	wait := SAWaiting.ValueUnset()
	if p := s.st.Paused; paused && p != nil {
		memo["paused"] = fmt.Sprintf("after %s %d since %s", s.unit, p.At, p.Since.UTC().Format(time.RFC3339))
		wait = SAWaiting.ValueSet(WaitingPaused)
	}
	if err := workflow.UpsertMemo(s.ctx, memo); err != nil {
		return err
	}
	return upsertSearch(s.ctx, s.in.Search, wait)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
