package report

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/workflows"
)

// Steering reads a running phase's live state through its query (workflows.SteerQuery), following
// back-tracking branches to the one that runs; ok is false when the phase does not answer (a kind
// that does not steer, or no workflow worker).
func Steering(ctx context.Context, c client.Client, phaseID string) (workflows.SteerStatus, bool) {
	var st workflows.SteerStatus
	for id, hops := phaseID, 0; id != "" && hops < 50; hops++ {
		v, err := c.QueryWorkflow(ctx, id, "", workflows.SteerQuery)
		if err != nil || v.Get(&st) != nil {
			return st, false
		}
		id = st.Elsewhere
	}
	return st, phaseID != ""
}

// SteerLines are what `temper status` says of a phase's steering: paused, what waits for its
// boundary, and what was applied where.
func SteerLines(run string, st workflows.SteerStatus) []string {
	var out []string
	if p := st.Paused; p != nil {
		line := fmt.Sprintf("paused at %s %d since %s (temper resume %s)", st.Unit, p.At, p.Since.UTC().Format(time.RFC3339), run)
		if p.Note != "" {
			line += ": " + p.Note
		}
		out = append(out, line)
	}
	for _, e := range st.Pending {
		out = append(out, fmt.Sprintf("pending: %s after %s %d", e.Label(), st.Unit, e.At))
	}
	for _, e := range st.Log {
		out = append(out, fmt.Sprintf("applied: %s after %s %d", e.Label(), st.Unit, e.At))
	}
	if len(st.Log) > 0 || len(st.Pending) > 0 {
		keys := make([]string, 0, len(st.Live))
		for k := range st.Live {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%s", k, FormatMetric(st.Live[k])))
		}
		out = append(out, "live: "+strings.Join(parts, " "))
	}
	return out
}

// WaitingLine says what a waiting gate needs.
func WaitingLine(run string, g workflows.GateWait) string {
	line := fmt.Sprintf("approval before phase %s since %s (temper approve %s, or temper reject %s)", g.Phase,
		g.Since.UTC().Format(time.RFC3339), run, run)
	if g.Timeout > 0 {
		onTimeout := g.OnTimeout
		if onTimeout == "" {
			onTimeout = "stop"
		}
		line += fmt.Sprintf("; after %s: %s", time.Duration(g.Timeout*float64(time.Second)), onTimeout)
	}
	return line
}

// LineageAt is where a fork starts: PHASE@STEP, or the phase's start.
func LineageAt(l workflows.Lineage) string {
	if l.Step < 0 {
		return l.Phase + " (its start)"
	}
	return fmt.Sprintf("%s@%d", l.Phase, l.Step)
}

// WaitingQuery is the visibility query of `temper ls --waiting`: runs at an approval gate and
// paused phases.
const WaitingQuery = "TemperWaiting IS NOT NULL AND ExecutionStatus = 'Running'"

// WriteWaiting prints the rows of WaitingQuery: what each waits for, and the command that ends it.
func WriteWaiting(w io.Writer, rows []SearchRow) {
	fmt.Fprintf(w, "%-52s %-10s %-19s %-8s %6s %s\n", "WORKFLOW", "WAITING", "STARTED (UTC)", "KIND", "STEP", "TO GO ON")
	for _, r := range rows {
		wait := attrText(r.Attrs, "TemperWaiting")
		next := "temper approve " + r.ID
		if wait == workflows.WaitingPaused {
			next = "temper resume " + attrText(r.Attrs, "TemperRun")
		}
		fmt.Fprintf(w, "%-52s %-10s %-19s %-8s %6s %s\n", r.ID, wait, r.Started, attrText(r.Attrs, "TemperKind"), attrText(r.Attrs, "TemperStep"), next)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "(nothing waits)")
	}
}
