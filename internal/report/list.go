package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// RunInfo is one pipeline run of a list.
type RunInfo struct {
	ID     string
	Status string
	Start  time.Time
	Phase  string
}

// Runs lists the newest n pipeline runs, newest first.
func Runs(ctx context.Context, c client.Client, n int) ([]RunInfo, error) {
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s'", workflows.PipelineName), PageSize: int32(n),
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var runs []RunInfo
	seen := map[string]bool{}
	for _, e := range resp.Executions {
		id := e.Execution.WorkflowId
		if seen[id] { // continue-as-new leaves one closed execution per run segment
			continue
		}
		seen[id] = true
		r := RunInfo{ID: id, Status: StatusName(e.Status), Start: e.StartTime.AsTime()}
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

// WriteRuns prints runs as a table.
func WriteRuns(w io.Writer, runs []RunInfo) {
	fmt.Fprintf(w, "%-44s %-11s %-20s %s\n", "RUN", "STATUS", "STARTED (UTC)", "PHASE")
	for _, r := range runs {
		fmt.Fprintf(w, "%-44s %-11s %-20s %s\n", r.ID, r.Status, r.Start.UTC().Format("2006-01-02 15:04:05"), r.Phase)
	}
}

// SearchRow is one workflow that a visibility query found, with Temper's attributes.
type SearchRow struct {
	ID, Status, Started string
	Attrs               map[string]any
}

// Search runs a visibility query in namespace and returns the newest execution of each workflow it
// finds, at most n. When the query fails on a namespace that lacks Temper's search attributes, the
// error says how to register them.
func Search(ctx context.Context, c client.Client, namespace, query string, n int) ([]SearchRow, error) {
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: int32(max(n, 1) * 4)})
	if err != nil {
		err = fmt.Errorf("list %q: %w", query, err)
		if missing, merr := workers.MissingSearchAttributes(ctx, c, namespace); merr == nil && len(missing) > 0 {
			err = fmt.Errorf("%w\nnamespace %s lacks Temper's search attributes %s; register them (docs/observability.md, \"Finding runs: search attributes\"):\n  %s",
				err, namespace, strings.Join(missing, ", "), strings.Join(workers.SearchAttributeCommands(namespace), "\n  "))
		}
		return nil, err
	}
	var rows []SearchRow
	seen := map[string]bool{}
	for _, e := range resp.Executions {
		id := e.Execution.WorkflowId
		if seen[id] { // continue-as-new: the newest run of a workflow comes first
			continue
		}
		seen[id] = true
		r := SearchRow{ID: id, Status: StatusName(e.Status), Started: e.StartTime.AsTime().UTC().Format("2006-01-02 15:04:05"), Attrs: map[string]any{}}
		for k, p := range e.GetSearchAttributes().GetIndexedFields() {
			var v any
			if converter.GetDefaultDataConverter().FromPayload(p, &v) == nil {
				r.Attrs[k] = v
			}
		}
		rows = append(rows, r)
		if len(rows) == n {
			break
		}
	}
	return rows, nil
}

// WriteSearch prints rows as a table: kind, step or iteration, held-out exact match, reward mean and
// back-tracking status ("-" where a workflow has not set one).
func WriteSearch(w io.Writer, rows []SearchRow) {
	fmt.Fprintf(w, "%-52s %-10s %-19s %-8s %6s %7s %7s %s\n", "WORKFLOW", "STATUS", "STARTED (UTC)", "KIND", "STEP", "EXACT", "REWARD", "BACKTRACK")
	for _, r := range rows {
		fmt.Fprintf(w, "%-52s %-10s %-19s %-8s %6s %7s %7s %s\n", r.ID, r.Status, r.Started,
			attrText(r.Attrs, "TemperKind"), attrText(r.Attrs, "TemperStep"), attrText(r.Attrs, "TemperExactMatch"),
			attrText(r.Attrs, "TemperRewardMean"), attrText(r.Attrs, "TemperBacktrack"))
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "(no workflow matches)")
	}
}

func attrText(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case nil:
		return "-"
	case float64:
		if k == "TemperStep" {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'f', 3, 64)
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// SearchQuery builds the visibility query of `temper ls --kind K --where EXPR [--waiting]`: the kind
// as a TemperKind filter, AND the expression as given (the server parses it and names what it
// rejects), AND WaitingQuery when waiting; "" when none is asked for. An unknown kind is a usage error.
func SearchQuery(kind, where string, waiting bool) (string, error) {
	if waiting {
		where = strings.TrimPrefix(strings.Join([]string{where, WaitingQuery}, ") AND ("), ") AND (")
	}
	var parts []string
	if kind != "" {
		kinds := []string{workflows.KindPipeline}
		for _, k := range workflows.PhaseKinds() {
			kinds = append(kinds, k.Kind)
		}
		if !slices.Contains(kinds, kind) {
			return "", usage.Errorf("--kind %q: want one of %s", kind, strings.Join(kinds, ", "))
		}
		parts = append(parts, fmt.Sprintf("TemperKind = '%s'", kind))
	}
	if w := strings.TrimSpace(where); w != "" {
		parts = append(parts, "("+w+")")
	}
	return strings.Join(parts, " AND "), nil
}
