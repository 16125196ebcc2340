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
	"github.com/temperml/temper/workflows"
)

// snapshot is what the server says about a running pipeline right now.
type snapshot struct {
	Progress workflows.PipelineProgress
	Step     demo.Progress // of the current phase's running activity, if any
	Activity string
	Attempt  int32
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
	eta := etaEstimator{}
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
			left := eta.update(s, time.Now())
			if tty {
				line := progressLine(s, left)
				fmt.Fprintf(w, "\r%-100s", line)
				last = line
				continue
			}
			// Logs get one line per observed step, without the ticking ETA.
			if line := progressLine(s, -1); line != last {
				fmt.Fprintln(w, progressLine(s, left))
				last = line
			}
		}
	}
}

// etaEstimator derives a rate from the steps observed within the current phase. Heartbeats reach the
// server in batches, so the rate is measured between observed changes and the ETA counts down in between.
type etaEstimator struct {
	phase               string
	firstStep, lastStep int
	firstAt, lastAt     time.Time
}

func (e *etaEstimator) update(s snapshot, now time.Time) time.Duration {
	if s.Progress.Phase != e.phase || s.Step.Step < e.lastStep {
		*e = etaEstimator{phase: s.Progress.Phase, firstStep: s.Step.Step, lastStep: s.Step.Step, firstAt: now, lastAt: now}
		return -1
	}
	if s.Step.Step != e.lastStep {
		e.lastStep, e.lastAt = s.Step.Step, now
	}
	done := e.lastStep - e.firstStep
	if done <= 0 || s.Step.Total == 0 {
		return -1
	}
	perStep := e.lastAt.Sub(e.firstAt) / time.Duration(done)
	return max(0, perStep*time.Duration(s.Step.Total-e.lastStep)-now.Sub(e.lastAt))
}

func progressLine(s snapshot, eta time.Duration) string {
	p := s.Progress
	line := fmt.Sprintf("phase %d/%d %s (%s)", p.Index+1, p.Total, p.Phase, p.Kind)
	if s.Step.Total > 0 {
		const width = 24
		filled := width * s.Step.Step / s.Step.Total
		line += fmt.Sprintf(" [%s%s] step %d/%d", strings.Repeat("#", filled), strings.Repeat(".", width-filled), s.Step.Step, s.Step.Total)
		if eta >= 0 {
			line += " ETA " + eta.Round(time.Second).String()
		}
	}
	if s.Attempt > 1 {
		line += fmt.Sprintf(" (attempt %d)", s.Attempt)
	}
	return line
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
		fmt.Fprintf(stdout, "%s running since %s\n  %s\n  %s\n", id, info.StartTime.AsTime().UTC().Format(time.RFC3339), progressLine(s, -1), cf.runURL(id))
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
