package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// searchQuery builds the visibility query of `temper ls --kind K --where EXPR`: the kind as a
// TemperKind filter, AND the expression as given (the server parses it and names what it rejects).
func searchQuery(kind, where string) (string, error) {
	var parts []string
	if kind != "" {
		kinds := []string{workflows.KindPipeline}
		for _, k := range workflows.PhaseKinds() {
			kinds = append(kinds, k.Kind)
		}
		if !slices.Contains(kinds, kind) {
			return "", usageErr("--kind %q: want one of %s", kind, strings.Join(kinds, ", "))
		}
		parts = append(parts, fmt.Sprintf("TemperKind = '%s'", kind))
	}
	if w := strings.TrimSpace(where); w != "" {
		parts = append(parts, "("+w+")")
	}
	return strings.Join(parts, " AND "), nil
}

// searchRow is one workflow that a visibility query found, with Temper's attributes.
type searchRow struct {
	ID, Status, Started string
	Attrs               map[string]any
}

// listSearch runs a visibility query and returns the newest execution of each workflow it finds.
func listSearch(ctx context.Context, c client.Client, cf *clientFlags, query string, n int) ([]searchRow, error) {
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: int32(max(n, 1) * 4)})
	if err != nil {
		err = fmt.Errorf("list %q: %w", query, err)
		if missing, merr := workers.MissingSearchAttributes(ctx, c, cf.namespace); merr == nil && len(missing) > 0 {
			err = fmt.Errorf("%w\nnamespace %s lacks Temper's search attributes %s; register them (README, \"Search attributes\"):\n  %s",
				err, cf.namespace, strings.Join(missing, ", "), strings.Join(workers.SearchAttributeCommands(cf.namespace), "\n  "))
		}
		return nil, err
	}
	var rows []searchRow
	seen := map[string]bool{}
	for _, e := range resp.Executions {
		id := e.Execution.WorkflowId
		if seen[id] { // continue-as-new: the newest run of a workflow comes first
			continue
		}
		seen[id] = true
		r := searchRow{ID: id, Status: statusName(e.Status), Started: e.StartTime.AsTime().UTC().Format("2006-01-02 15:04:05"), Attrs: map[string]any{}}
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

// printSearch prints rows as a table: kind, step or iteration, held-out exact match, reward mean and
// back-tracking status ("-" where a workflow has not set one).
func printSearch(rows []searchRow) {
	fmt.Fprintf(stdout, "%-52s %-10s %-19s %-8s %6s %7s %7s %s\n", "WORKFLOW", "STATUS", "STARTED (UTC)", "KIND", "STEP", "EXACT", "REWARD", "BACKTRACK")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-52s %-10s %-19s %-8s %6s %7s %7s %s\n", r.ID, r.Status, r.Started,
			attrText(r.Attrs, "TemperKind"), attrText(r.Attrs, "TemperStep"), attrText(r.Attrs, "TemperExactMatch"),
			attrText(r.Attrs, "TemperRewardMean"), attrText(r.Attrs, "TemperBacktrack"))
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "(no workflow matches)")
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
