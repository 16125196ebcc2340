package reward

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
)

// ParseSpec reads a reward spec as `temper score --reward` takes it: a file holding a spec, a spec
// as YAML/JSON text ({verifiers: [{name: math}]}), or verifier names separated by commas
// ("math,format").
func ParseSpec(arg string) (verify.Spec, error) {
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

// ReadItems reads completions to score (`temper score`): JSONL lines with prompt and completion and, for the
// reference, either reference (a JSON object), task (a built-in task's checker, with answer), or
// answer alone. Rollout lines (`temper samples --json`) are accepted as they are. Errors name file and
// line.
func ReadItems(r io.Reader, name string) ([]rewardapi.Item, []int, error) {
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

// MergeMetrics combines the metrics of consecutive batches (means weighted by judged items).
func MergeMetrics(a, b rewardapi.Metrics) rewardapi.Metrics {
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
