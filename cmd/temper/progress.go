package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/demo"
	rewardcontract "github.com/temperml/temper/activities/reward/contract"
	rolloutcontract "github.com/temperml/temper/activities/rollout/contract"
	traincontract "github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/workflows"
)

// snapshot is what the server says about a running pipeline right now.
type snapshot struct {
	Progress workflows.PipelineProgress
	Step     demo.Progress // of the current phase's running activity, if any
	Activity string
	Attempt  int32
	// ChildStart is when the current phase's workflow run started (the latest run after a
	// continue-as-new).
	ChildStart time.Time
}

// observe queries the pipeline and describes the current phase's child workflow for heartbeats.
func observe(ctx context.Context, c client.Client, id string) (snapshot, error) {
	var s snapshot
	v, err := c.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	if err != nil {
		return s, err
	}
	if err := v.Get(&s.Progress); err != nil {
		return s, err
	}
	if s.Progress.ChildID == "" {
		return s, nil
	}
	desc, err := c.DescribeWorkflowExecution(ctx, s.Progress.ChildID, "")
	if err != nil {
		return s, nil
	}
	if st := desc.GetWorkflowExecutionInfo().GetStartTime(); st != nil {
		s.ChildStart = st.AsTime()
	}
	for _, pa := range desc.PendingActivities {
		s.Activity = pa.ActivityType.GetName()
		s.Attempt = pa.Attempt
		if pa.HeartbeatDetails != nil && len(pa.HeartbeatDetails.Payloads) > 0 {
			_ = json.Unmarshal(pa.HeartbeatDetails.Payloads[0].Data, &s.Step)
		}
	}
	return s, nil
}

// follow draws a progress line until the run ends, then prints its result.
func follow(ctx context.Context, c client.Client, run client.WorkflowRun, w io.Writer, asJSON bool) error {
	start := time.Now()
	done := make(chan error, 1)
	var out workflows.PipelineOutput
	go func() { done <- run.Get(ctx, &out) }()
	tty := isTTY(w)
	var last string
	eta := etaEstimator{maxSeconds: phaseMaxSeconds(ctx, c, run.GetID())}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if tty && last != "" {
				fmt.Fprintln(w)
			}
			r := toResult(run.GetID(), out, time.Since(start), err)
			printResult(stdout, r, asJSON)
			if err != nil {
				return fmt.Errorf("run %s failed", run.GetID())
			}
			return nil
		case <-ctx.Done():
			fmt.Fprintf(w, "\nstopped following %s; the run goes on (temper status %s)\n", run.GetID(), run.GetID())
			return ctx.Err()
		case <-tick.C:
			s, err := observe(ctx, c, run.GetID())
			if err != nil {
				continue
			}
			left, frac := eta.update(s, time.Now())
			if tty {
				line := progressLine(s, left, frac)
				fmt.Fprintf(w, "\r%-100s", line)
				last = line
				continue
			}
			// Logs get one line per observed step, without the ticking ETA.
			if line := progressLine(s, -1, -1); line != last {
				fmt.Fprintln(w, progressLine(s, left, -1))
				last = line
			}
		}
	}
}

// etaEstimator turns the observed steps of the current phase into a smooth ETA. Heartbeats reach the
// server in batches (every ~25 s), so the step seen jumps; the rate is measured between observed changes,
// the remaining time counts down in between, and a new estimate is blended in over etaBlend instead of
// replacing the shown one at once. When the phase has max_seconds and that ends it before its steps, the
// ETA is the time left of it.
type etaEstimator struct {
	maxSeconds map[string]float64 // per phase name; from the pipeline input (0 or absent: no limit)

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

// update returns the ETA to show (-1: unknown) and the fraction of the phase's steps done, interpolated
// between heartbeats at the measured rate (-1: unknown).
func (e *etaEstimator) update(s snapshot, now time.Time) (time.Duration, float64) {
	if s.Progress.Phase != e.phase || e.rates == nil {
		*e = etaEstimator{maxSeconds: e.maxSeconds, phase: s.Progress.Phase, phaseStart: now, rates: map[string]*stepRate{}, shown: -1}
	}
	if !s.ChildStart.IsZero() && s.ChildStart.Before(e.phaseStart) {
		e.phaseStart = s.ChildStart // the phase began before we looked
	}
	raw, frac, source := time.Duration(-1), -1.0, ""
	if s.Step.Total > 0 {
		key := fmt.Sprintf("%s/%d", s.Activity, s.Step.Total)
		source = key
		r := e.rates[key]
		if r == nil || s.Step.Step < r.lastStep {
			r = &stepRate{firstStep: s.Step.Step, lastStep: s.Step.Step, firstAt: now, lastAt: now}
			e.rates[key] = r
		}
		if s.Step.Step != r.lastStep {
			r.lastStep, r.lastAt = s.Step.Step, now
		}
		frac = float64(s.Step.Step) / float64(s.Step.Total)
		if done := r.lastStep - r.firstStep; done > 0 {
			perStep := r.lastAt.Sub(r.firstAt) / time.Duration(done)
			raw = max(0, perStep*time.Duration(s.Step.Total-r.lastStep)-now.Sub(r.lastAt))
			if perStep > 0 {
				est := float64(r.lastStep) + float64(now.Sub(r.lastAt))/float64(perStep)
				frac = min(est, float64(s.Step.Total)) / float64(s.Step.Total)
			}
		}
	}
	if limit := e.maxSeconds[e.phase]; limit > 0 {
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

// progressLine renders the phase, a bar filled to frac (the reported step's fraction when frac < 0),
// the reported step and the ETA (when eta >= 0).
func progressLine(s snapshot, eta time.Duration, frac float64) string {
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
	case strings.HasSuffix(activity, "Chunk") || activity == traincontract.PolicyStepName || activity == demo.TickName:
		return "step"
	case strings.HasSuffix(activity, "Evaluate"):
		return "eval"
	case activity == rolloutcontract.GenerateName:
		return "prompts"
	case activity == rewardcontract.ScoreName:
		return "scored"
	default:
		return "done"
	}
}

// phaseMaxSeconds reads each phase's max_seconds from the run's input, so the ETA can follow it; nil
// when the input cannot be read.
func phaseMaxSeconds(ctx context.Context, c client.Client, id string) map[string]float64 {
	in, ok := runInput(ctx, c, id)
	if !ok {
		return nil
	}
	return maxSecondsOf(in)
}

// runInput reads a run's pipeline input from the first event of its current history.
func runInput(ctx context.Context, c client.Client, id string) (workflows.PipelineInput, bool) {
	var in workflows.PipelineInput
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, false
	}
	ev, err := it.Next()
	if err != nil {
		return in, false
	}
	payloads := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(payloads) == 0 || json.Unmarshal(payloads[0].GetData(), &in) != nil {
		return in, false
	}
	return in, true
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

type runInfo struct {
	ID     string
	Status string
	Start  time.Time
	Phase  string
}

func listRuns(ctx context.Context, c client.Client, n int) ([]runInfo, error) {
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s'", workflows.PipelineName), PageSize: int32(n),
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var runs []runInfo
	seen := map[string]bool{}
	for _, e := range resp.Executions {
		id := e.Execution.WorkflowId
		if seen[id] { // continue-as-new leaves one closed execution per run segment
			continue
		}
		seen[id] = true
		r := runInfo{ID: id, Status: statusName(e.Status), Start: e.StartTime.AsTime()}
		if f, ok := e.Memo.GetFields()["phase"]; ok {
			_ = json.Unmarshal(f.Data, &r.Phase)
		}
		runs = append(runs, r)
		if len(runs) == n {
			break
		}
	}
	return runs, nil
}

func statusName(s enumspb.WorkflowExecutionStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

func printStatus(ctx context.Context, c client.Client, cf *clientFlags, id string, asJSON bool) error {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Errorf("describe %s: %w", id, err)
	}
	info := desc.WorkflowExecutionInfo
	status := statusName(info.Status)
	if info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		s, err := observe(ctx, c, id)
		if err != nil {
			return fmt.Errorf("query %s: %w", id, err)
		}
		if asJSON {
			b, _ := json.Marshal(map[string]any{"run_id": id, "status": status, "progress": s.Progress, "step": s.Step})
			fmt.Fprintln(stdout, string(b))
			return nil
		}
		fmt.Fprintf(stdout, "%s running since %s\n  %s\n  %s\n", id, info.StartTime.AsTime().UTC().Format(time.RFC3339), progressLine(s, -1, -1), cf.runURL(id))
		if line := phaseMemo(ctx, c, s.Progress.ChildID); line != "" {
			fmt.Fprintf(stdout, "  now: %s\n", line)
		}
		for _, r := range s.Progress.Done {
			fmt.Fprintf(stdout, "  done: %-12s %-8s %s\n", r.Name, r.Kind, r.Checkpoint)
		}
		return nil
	}
	var out workflows.PipelineOutput
	runErr := c.GetWorkflow(ctx, id, "").Get(ctx, &out)
	elapsed := time.Duration(0)
	if info.CloseTime != nil {
		elapsed = info.CloseTime.AsTime().Sub(info.StartTime.AsTime())
	}
	r := toResult(id, out, elapsed, runErr)
	r.Status = status
	printResult(stdout, r, asJSON)
	return nil
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// phaseMemo renders the running phase workflow's memo (its latest step, loss, reward, held-out exact
// match: what each phase kind upserts) as sorted key=value pairs, or "" when there is none.
func phaseMemo(ctx context.Context, c client.Client, childID string) string {
	if childID == "" {
		return ""
	}
	desc, err := c.DescribeWorkflowExecution(ctx, childID, "")
	if err != nil {
		return ""
	}
	fields := desc.WorkflowExecutionInfo.GetMemo().GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var v any
		if json.Unmarshal(fields[k].GetData(), &v) != nil {
			continue
		}
		if f, ok := v.(float64); ok {
			parts = append(parts, fmt.Sprintf("%s=%.4g", k, f))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}
