package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/temperml/temper/activities/reward"
	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers"
)

// scoreLine is one verdict of `temper score --json`.
type scoreLine struct {
	Line     int                `json:"line"`
	ID       string             `json:"id"`
	Score    float64            `json:"score"`
	Pass     bool               `json:"pass"`
	Feedback string             `json:"feedback,omitempty"`
	Partial  map[string]float64 `json:"partial,omitempty"`
	Error    string             `json:"error,omitempty"`
}

// parseRewardSpec reads --reward: a file holding a spec, a spec as YAML/JSON text
// ({verifiers: [{name: math}]}), or verifier names separated by commas ("math,format").
func parseRewardSpec(arg string) (verify.Spec, error) {
	var spec verify.Spec
	data := []byte(arg)
	name := "--reward"
	if b, err := os.ReadFile(arg); err == nil {
		data, name = b, arg
	}
	tree, err := config.ParseTree(data)
	if err != nil {
		return spec, fmt.Errorf("%s: %w", name, err)
	}
	if s, ok := tree.(string); ok { // a list of names
		for _, n := range strings.Split(s, ",") {
			if n = strings.TrimSpace(n); n != "" {
				spec.Verifiers = append(spec.Verifiers, verify.Component{Name: n})
			}
		}
		return spec, nil
	}
	if err := config.Decode(tree, &spec, ""); err != nil {
		return spec, fmt.Errorf("%s: %w", name, err)
	}
	return spec, nil
}

// readScoreItems reads completions to score: JSONL lines with prompt and completion and, for the
// reference, either reference (a JSON object), task (a built-in task's checker, with answer), or
// answer alone. Rollout lines (`temper samples --json`) are accepted as they are. Errors name file and
// line.
func readScoreItems(r io.Reader, name string) ([]rewardapi.Item, []int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var items []rewardapi.Item
	var lines []int
	for n := 1; sc.Scan(); n++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: not a JSON object: %v", name, n, err)
		}
		if _, ok := keys["completion"]; !ok {
			return nil, nil, fmt.Errorf("%s:%d: \"completion\" is required", name, n)
		}
		var ro rollout.Rollout
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ro); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %v (fields: id, prompt, completion, reference, task, answer, or a rollout line)", name, n, err)
		}
		ref := ro.Reference
		switch {
		case len(ref) > 0:
			var obj map[string]any
			if json.Unmarshal(ref, &obj) != nil {
				return nil, nil, fmt.Errorf("%s:%d: reference: want a JSON object", name, n)
			}
		case ro.Task != "":
			ref, _ = json.Marshal(map[string]string{"task": ro.Task, "prompt": ro.Prompt, "answer": ro.Answer})
		case ro.Answer != "":
			ref, _ = json.Marshal(map[string]string{"answer": ro.Answer})
		}
		id := ro.ID
		if id == "" {
			id = fmt.Sprintf("%s:%d", name, n)
		}
		items = append(items, rewardapi.Item{ID: id, Prompt: ro.Prompt, Completion: ro.Completion, Reference: ref})
		lines = append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: read: %w", name, err)
	}
	if len(items) == 0 {
		return nil, nil, fmt.Errorf("%s: no completions", name)
	}
	return items, lines, nil
}

func init() {
	register(&command{name: "score", summary: "score completions (JSONL) with a reward spec, as the reward activity would: per-line score, pass, feedback and a summary",
		usage: "--reward SPEC FILE.jsonl", flags: flagsOf[scoreCmd]()})
}

type scoreCmd struct {
	spec    string
	asJSON  bool
	timeout time.Duration
}

func (c *scoreCmd) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.spec, "reward", "task", "verifiers: names (\"math,format\"), a spec as YAML/JSON ({verifiers: [{name: exact, params: {tag: \"-\"}}]}) or a file holding one; the default \"task\" is a built-in task's checker")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON line per completion, then one with the summary")
	fs.DurationVar(&c.timeout, "item-timeout", reward.DefaultItemTimeout, "time limit per completion")
}

func (c *scoreCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("score wants one JSONL file, got %d arguments (usage: temper score --reward SPEC FILE.jsonl)", len(args))
	}
	s, err := parseRewardSpec(c.spec)
	if err != nil {
		return usageErr("%v", err)
	}
	f, err := os.Open(args[0])
	if err != nil {
		return usageErr("%v", err)
	}
	defer f.Close()
	items, lines, err := readScoreItems(f, args[0])
	if err != nil {
		return usageErr("%v", err)
	}
	verdicts, m, err := c.score(ctx, s, items)
	if err != nil {
		return err
	}
	for i, v := range verdicts {
		c.printVerdict(args[0], lines[i], v)
	}
	if c.asJSON {
		b, _ := json.Marshal(map[string]any{"summary": m})
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "%d completions: %d judged, %d errors (%d timed out); mean score %s, pass rate %s\n",
		m.Items, m.Judged, m.Errors, m.TimedOut, report.FormatMetric(m.MeanScore), report.FormatMetric(m.PassRate))
	for _, v := range m.Verifiers {
		fmt.Fprintf(stdout, "  %-16s mean %s\n", v.Name, report.FormatMetric(v.MeanScore))
	}
	return nil
}

// score runs the reward activity's scoring in-process, reward.MaxItems at a time.
func (c *scoreCmd) score(ctx context.Context, s verify.Spec, items []rewardapi.Item) ([]rewardapi.ItemVerdict, rewardapi.Metrics, error) {
	var m rewardapi.Metrics
	usesCode := false
	for _, v := range s.Verifiers {
		usesCode = usesCode || v.Name == "code"
	}
	ra, err := workers.NewRewardActivities(workers.Options{}, usesCode)
	if err != nil {
		return nil, m, err
	}
	var verdicts []rewardapi.ItemVerdict
	for lo := 0; lo < len(items); lo += rewardapi.MaxItems {
		out, err := ra.ScoreItems(ctx, rewardapi.ScoreInput{Items: items[lo:min(lo+rewardapi.MaxItems, len(items))], Spec: s,
			ItemTimeout: config.Duration(c.timeout)}, nil)
		if errors.Is(err, reward.ErrInvalidInput) {
			return nil, m, usageErr("--reward: %v", err)
		}
		if err != nil {
			return nil, m, err
		}
		verdicts = append(verdicts, out.Verdicts...)
		m = mergeMetrics(m, out.Metrics)
	}
	return verdicts, m, nil
}

// printVerdict prints the verdict on line of file: a JSON line, or score, pass and feedback.
func (c *scoreCmd) printVerdict(file string, line int, v rewardapi.ItemVerdict) {
	l := scoreLine{Line: line, ID: v.ID, Score: v.Score, Pass: v.Pass, Feedback: v.Feedback, Partial: v.Partial, Error: v.Error}
	if c.asJSON {
		b, _ := json.Marshal(l)
		fmt.Fprintln(stdout, string(b))
		return
	}
	verdict := "FAIL"
	if v.Pass {
		verdict = "pass"
	}
	text := fmt.Sprintf("%s:%d  %-6s %s", file, l.Line, report.FormatMetric(v.Score), verdict)
	if v.Error != "" {
		text += "  error: " + v.Error
	} else if v.Feedback != "" {
		text += "  " + strings.ReplaceAll(v.Feedback, "\n", " ")
	}
	fmt.Fprintln(stdout, text)
}

// mergeMetrics combines the metrics of consecutive batches (means weighted by judged items).
func mergeMetrics(a, b rewardapi.Metrics) rewardapi.Metrics {
	if a.Items == 0 {
		return b
	}
	j := a.Judged + b.Judged
	mean := func(x, y float64) float64 {
		if j == 0 {
			return 0
		}
		return (x*float64(a.Judged) + y*float64(b.Judged)) / float64(j)
	}
	out := rewardapi.Metrics{Items: a.Items + b.Items, Judged: j, Errors: a.Errors + b.Errors, TimedOut: a.TimedOut + b.TimedOut,
		MeanScore: mean(a.MeanScore, b.MeanScore), PassRate: mean(a.PassRate, b.PassRate), SandboxMode: a.SandboxMode}
	for i, v := range a.Verifiers {
		if i < len(b.Verifiers) {
			v.MeanScore = mean(v.MeanScore, b.Verifiers[i].MeanScore)
		}
		out.Verifiers = append(out.Verifiers, v)
	}
	return out
}
