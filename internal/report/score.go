package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/temperml/temper/activities/reward/rewardapi"
)

// ScoreLine is one verdict of `temper score --json`.
type ScoreLine struct {
	Line     int                `json:"line"`
	ID       string             `json:"id"`
	Score    float64            `json:"score"`
	Pass     bool               `json:"pass"`
	Feedback string             `json:"feedback,omitempty"`
	Partial  map[string]float64 `json:"partial,omitempty"`
	Error    string             `json:"error,omitempty"`
}

// Scores writes what `temper score` prints: each verdict (that of line lines[i] of file) as a JSON
// line or as score, pass and feedback, then the summary.
func Scores(w io.Writer, file string, lines []int, verdicts []rewardapi.ItemVerdict, m rewardapi.Metrics, asJSON bool) {
	for i, v := range verdicts {
		printVerdict(w, file, lines[i], v, asJSON)
	}
	if asJSON {
		b, _ := json.Marshal(map[string]any{"summary": m})
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "%d completions: %d judged, %d errors (%d timed out); mean score %s, pass rate %s\n",
		m.Items, m.Judged, m.Errors, m.TimedOut, FormatMetric(m.MeanScore), FormatMetric(m.PassRate))
	for _, v := range m.Verifiers {
		fmt.Fprintf(w, "  %-16s mean %s\n", v.Name, FormatMetric(v.MeanScore))
	}
}

// printVerdict prints the verdict on line of file: a JSON line, or score, pass and feedback.
func printVerdict(w io.Writer, file string, line int, v rewardapi.ItemVerdict, asJSON bool) {
	l := ScoreLine{Line: line, ID: v.ID, Score: v.Score, Pass: v.Pass, Feedback: v.Feedback, Partial: v.Partial, Error: v.Error}
	if asJSON {
		b, _ := json.Marshal(l)
		fmt.Fprintln(w, string(b))
		return
	}
	verdict := "FAIL"
	if v.Pass {
		verdict = "pass"
	}
	text := fmt.Sprintf("%s:%d  %-6s %s", file, l.Line, FormatMetric(v.Score), verdict)
	if v.Error != "" {
		text += "  error: " + v.Error
	} else if v.Feedback != "" {
		text += "  " + strings.ReplaceAll(v.Feedback, "\n", " ")
	}
	fmt.Fprintln(w, text)
}
