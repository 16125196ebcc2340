package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/workflows"
)

// Result is the one JSON line that `--json` prints at the end of a run.
type Result struct {
	RunID          string        `json:"run_id"`
	Status         string        `json:"status"`
	ElapsedSeconds float64       `json:"elapsed_seconds"`
	Phases         []PhaseResult `json:"phases"`
	Error          string        `json:"error,omitempty"`
	// Stopped says why a gate ended the run before its last phase (the run completed).
	Stopped string `json:"stopped,omitempty"`
}

// PhaseResult is one phase of a Result.
type PhaseResult struct {
	Name       string                 `json:"name"`
	Kind       string                 `json:"kind"`
	Checkpoint string                 `json:"checkpoint"`
	Seconds    float64                `json:"seconds"`
	Metrics    map[string]float64     `json:"metrics,omitempty"`
	Curve      []workflows.CurvePoint `json:"curve,omitempty"`   // held-out exact match over training time
	Skipped    string                 `json:"skipped,omitempty"` // why a gate skipped the phase
}

// ToResult is the Result of run id: its output, how long it took, and its error (nil: completed).
func ToResult(id string, out workflows.PipelineOutput, elapsed time.Duration, err error) Result {
	r := Result{RunID: id, Status: "completed", ElapsedSeconds: elapsed.Seconds(), Stopped: out.Stopped}
	for _, p := range out.Phases {
		r.Phases = append(r.Phases, PhaseResult{Name: p.Name, Kind: p.Kind, Checkpoint: p.Checkpoint, Seconds: p.Seconds, Metrics: p.Metrics, Curve: p.Curve,
			Skipped: p.Skipped})
	}
	if err != nil {
		r.Status, r.Error = "failed", err.Error()
	}
	return r
}

// WriteResult prints r: per phase its time, checkpoint and metrics, then the held-out exact match
// along the pipeline; asJSON prints the one JSON line instead.
func WriteResult(w io.Writer, r Result, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "%s %s in %.1fs\n", r.RunID, r.Status, r.ElapsedSeconds)
	for _, p := range r.Phases {
		if p.Skipped != "" {
			fmt.Fprintf(w, "  %-12s %-8s skipped: %s\n", p.Name, p.Kind, p.Skipped)
			continue
		}
		fmt.Fprintf(w, "  %-12s %-8s %6.1fs  %s\n", p.Name, p.Kind, p.Seconds, p.Checkpoint)
		for _, k := range sortedKeys(p.Metrics) {
			fmt.Fprintf(w, "      %-24s %s\n", k, FormatMetric(p.Metrics[k]))
		}
	}
	if line := ExactMatchLine(r.Phases); line != "" {
		fmt.Fprintln(w, line)
	}
	if r.Stopped != "" {
		fmt.Fprintf(w, "stopped: %s\n", r.Stopped)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
}

// FormatMetric prints a metric for people: whole numbers (steps) and large ones (tokens/s) as
// integers, others with 4 significant digits, since a float64's 16 digits are noise to a reader. JSON
// output keeps full precision.
func FormatMetric(v float64) string {
	if a := math.Abs(v); a < 1e15 && (v == math.Trunc(v) || a >= 1000) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// ExactMatchLine summarises held-out exact match along the pipeline ("held-out exact match: start
// 0.000 → pretrain 0.045 → sft 0.120 → grpo 0.190"), or "" when no phase evaluated it.
func ExactMatchLine(phases []PhaseResult) string {
	var parts []string
	for i, p := range phases {
		v, ok := p.Metrics["heldout_exact_match"]
		if !ok {
			continue
		}
		if b, ok := p.Metrics["heldout_exact_match_before"]; ok && i == 0 {
			parts = append(parts, fmt.Sprintf("start %.3f", b))
		}
		parts = append(parts, fmt.Sprintf("%s %.3f", p.Name, v))
	}
	if len(parts) == 0 {
		return ""
	}
	return "held-out exact match: " + strings.Join(parts, " → ")
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WriteStatus prints run id: a running one's progress line, current phase memo and finished phases
// (link(id) is its page in the Web UI), a closed one's Result.
func WriteStatus(ctx context.Context, c client.Client, w io.Writer, id string, link func(string) string, asJSON bool) error {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Errorf("describe %s: %w", id, err)
	}
	info := desc.WorkflowExecutionInfo
	status := StatusName(info.Status)
	if info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		s, err := Observe(ctx, c, id)
		if err != nil {
			return writeUnanswered(ctx, c, w, id, desc, err)
		}
		if asJSON {
			m := map[string]any{"run_id": id, "status": status, "progress": s.Progress, "step": s.Step}
			if st, ok := Steering(ctx, c, s.Progress.ChildID); ok {
				m["steer"] = st
			}
			b, _ := json.Marshal(m)
			fmt.Fprintln(w, string(b))
			return nil
		}
		fmt.Fprintf(w, "%s running since %s\n  %s\n  %s\n", id, info.StartTime.AsTime().UTC().Format(time.RFC3339), ProgressLine(s, -1, -1), link(id))
		if p := s.Progress.Parent; p != nil {
			fmt.Fprintf(w, "  forked from %s at %s\n", p.Run, LineageAt(*p))
		}
		if g := s.Progress.Waiting; g != nil {
			fmt.Fprintf(w, "  waiting: %s\n", WaitingLine(id, *g))
		} else if line := phaseMemo(ctx, c, s.Progress.ChildID); line != "" {
			fmt.Fprintf(w, "  now: %s\n", line)
		}
		if st, ok := Steering(ctx, c, s.Progress.ChildID); ok {
			for _, line := range SteerLines(id, st) {
				fmt.Fprintf(w, "  %s\n", line)
			}
		}
		for _, r := range s.Progress.Done {
			fmt.Fprintf(w, "  done: %-12s %-8s %s\n", r.Name, r.Kind, r.Checkpoint)
		}
		return nil
	}
	var out workflows.PipelineOutput
	runErr := c.GetWorkflow(ctx, id, "").Get(ctx, &out)
	elapsed := time.Duration(0)
	if info.CloseTime != nil {
		elapsed = info.CloseTime.AsTime().Sub(info.StartTime.AsTime())
	}
	r := ToResult(id, out, elapsed, runErr)
	r.Status = status
	WriteResult(w, r, asJSON)
	return nil
}

// writeUnanswered is the status of a running run whose workflow workers do not answer its query
// (all stopped, as they may be while a phase is paused): what the server itself holds, the
// pipeline's and the current phase's memo.
func writeUnanswered(ctx context.Context, c client.Client, w io.Writer, id string, desc *workflowservice.DescribeWorkflowExecutionResponse, qerr error) error {
	info := desc.WorkflowExecutionInfo
	fields := info.GetMemo().GetFields()
	var phase string
	if f, ok := fields["phase"]; !ok || json.Unmarshal(f.GetData(), &phase) != nil {
		return fmt.Errorf("query %s: %w", id, qerr)
	}
	fmt.Fprintf(w, "%s running since %s; no workflow worker answers its query (%v)\n", id, info.StartTime.AsTime().UTC().Format(time.RFC3339), qerr)
	if line := phaseMemo(ctx, c, id); line != "" {
		fmt.Fprintf(w, "  run: %s\n", line)
	}
	if line := phaseMemo(ctx, c, id+"."+phase); line != "" {
		fmt.Fprintf(w, "  now: %s %s\n", phase, line)
	}
	return nil
}
