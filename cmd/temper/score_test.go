package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/temperml/temper/internal/report"
)

// TestScore runs `temper score` on small files with the task checker, built-in verifiers given by name
// and as YAML, and --json.
func TestScore(t *testing.T) {
	add := writeFile(t, "add.jsonl", `{"id":"a","prompt":"12+34=","completion":"46","task":"add2","answer":"46"}`+"\n\n"+
		`{"prompt":"12+34=","completion":"47","task":"add2","answer":"46"}`+"\n")
	exact := writeFile(t, "exact.jsonl", `{"completion":"so <answer>4</answer>","answer":"4"}`+"\n"+`{"completion":"5","answer":"4"}`+"\n")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"task checker by default", []string{add}, []string{add + ":1  1      pass", add + ":3  0      FAIL", "2 completions: 2 judged, 0 errors (0 timed out); mean score 0.5, pass rate 0.5"}},
		{"verifier by name", []string{"--reward", "exact", exact}, []string{exact + ":1  1      pass", exact + ":2  0      FAIL", "mean score 0.5"}},
		{"spec as YAML", []string{"--reward", `{verifiers: [{name: exact, params: {tag: "-"}}]}`, exact}, []string{exact + ":1  0      FAIL", exact + ":2  0      FAIL", "mean score 0,"}},
		{"two verifiers", []string{"--reward", "exact,contains", exact}, []string{"exact            mean 0.5", "contains         mean 0.5"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := cli(t, append([]string{"score"}, c.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		out, err := cli(t, "score", "--json", add)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var first report.ScoreLine
		var sum struct {
			Summary struct {
				Items    int     `json:"items"`
				PassRate float64 `json:"pass_rate"`
			} `json:"summary"`
		}
		if len(lines) != 3 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[2]), &sum) != nil ||
			first.ID != "a" || !first.Pass || first.Line != 1 || sum.Summary.Items != 2 || sum.Summary.PassRate != 0.5 {
			t.Fatalf("json output:\n%s", out)
		}
	})
}

// TestScoreBadInput: every bad input is a usage error naming the file and line, or the spec.
func TestScoreBadInput(t *testing.T) {
	cases := []struct{ name, spec, body, want string }{
		{"missing completion", "task", `{"prompt":"1+2=","completion":"3","task":"add2","answer":"3"}` + "\n" + `{"prompt":"1+2="}` + "\n", `f.jsonl:2: "completion" is required`},
		{"misspelled field", "task", `{"prompt":"1+2=","completion":"3","anwser":"3"}` + "\n", `f.jsonl:1: json: unknown field "anwser"`},
		{"not an object", "task", "[1,2]\n", `f.jsonl:1: not a JSON object`},
		{"reference not an object", "exact", `{"completion":"3","reference":"3"}` + "\n", `f.jsonl:1: reference: want a JSON object`},
		{"empty file", "task", "\n\n", `f.jsonl: no completions`},
		{"unknown verifier", "maht", `{"completion":"3","answer":"3"}` + "\n", `maht`},
		{"misspelled spec field", "{verifier: [{name: math}]}", `{"completion":"3","answer":"3"}` + "\n", `verifier: unknown field; did you mean "verifiers"?`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := cli(t, "score", "--reward", c.spec, writeFile(t, "f.jsonl", c.body))
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v (output %q), want a usage error containing %q", err, out, c.want)
			}
		})
	}
}
