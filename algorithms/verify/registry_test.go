package verify

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestComposeWeightedMean(t *testing.T) {
	spec := Spec{Verifiers: []Component{
		{Name: "math", Weight: 3},
		{Name: "format", Weight: 1, Params: json.RawMessage(`{"tags": ["think", "answer"]}`)},
		{Name: "exact", As: "exact-tracked", ReportOnly: true},
	}}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := Compose(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Labels(), ","); got != "math,format,exact-tracked" {
		t.Errorf("labels = %s", got)
	}
	r := json.RawMessage(`{"answer": "4"}`)
	cases := []struct {
		completion string
		score      float64
		pass       bool
		partial    map[string]float64
	}{
		{"<think>2+2</think><answer>4</answer>", 1, true, map[string]float64{"math": 1, "format": 1, "exact-tracked": 1}},
		// Right answer, missing think: (3*1 + 1*0.5)/4.
		{"<answer>4</answer>", 3.5 / 4, false, map[string]float64{"math": 1, "format": 0.5, "exact-tracked": 1}},
		// Wrong answer, good format: (0 + 1)/4; report-only exact does not count.
		{"<think>x</think><answer>5</answer>", 0.25, false, map[string]float64{"math": 0, "format": 1, "exact-tracked": 0}},
	}
	for _, tc := range cases {
		got, err := c.Verify(context.Background(), Sample{Completion: tc.completion, Reference: r})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.Score-tc.score) > 1e-12 || got.Pass != tc.pass {
			t.Errorf("%q: got %+v, want score %v pass %v", tc.completion, got, tc.score, tc.pass)
		}
		for k, want := range tc.partial {
			if got.Partial[k] != want {
				t.Errorf("%q: partial[%s] = %v, want %v", tc.completion, k, got.Partial[k], want)
			}
		}
		if !tc.pass && !strings.Contains(got.Feedback, ":") {
			t.Errorf("%q: feedback %q should name the failing component", tc.completion, got.Feedback)
		}
	}
	// Sub-scores of components appear as label/sub.
	j, err := Compose(Spec{Verifiers: []Component{{Name: "json", Params: json.RawMessage(`{"schema": {"type": "object"}}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := j.Verify(context.Background(), Sample{Completion: "[1]"})
	if got.Partial["json/parse"] != 1 || got.Partial["json/schema"] != 0 {
		t.Errorf("nested partials: %+v", got.Partial)
	}
	// Oversized completions fail unread.
	got, _ = c.Verify(context.Background(), Sample{Completion: strings.Repeat("x", MaxCompletionBytes+1), Reference: r})
	if got.Pass || got.Score != 0 || !strings.Contains(got.Feedback, "longer") {
		t.Errorf("oversized: %+v", got)
	}
	// Reference errors surface with the label.
	if _, err := c.Verify(context.Background(), Sample{Completion: "4"}); err == nil || !strings.Contains(err.Error(), "math") {
		t.Errorf("missing answer: err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Verify(ctx, Sample{Completion: "4", Reference: r}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestSpecValidate(t *testing.T) {
	cases := []struct {
		spec string
		want []string // substrings of the error
	}{
		{`{"verifiers": []}`, []string{"verifiers is empty", "allowed names", "math"}},
		{`{"verifiers": [{"name": "maths"}]}`, []string{"verifiers[0]", `unknown verifier "maths"`, "allowed: ", "choice", "math"}},
		{`{"verifiers": [{"name": ""}]}`, []string{"verifiers[0].name is empty"}},
		{`{"verifiers": [{"name": "math", "weight": -1}]}`, []string{"verifiers[0].weight=-1"}},
		{`{"verifiers": [{"name": "math"}, {"name": "math"}]}`, []string{"verifiers[1]", `label "math" already used`}},
		{`{"verifiers": [{"name": "math", "params": {"tol": 1}}]}`, []string{"verifiers[0] (math)", `unknown field "tol"`, "allowed: abs_tolerance"}},
		{`{"verifiers": [{"name": "math", "params": [1]}]}`, []string{"verifiers[0].params: want a JSON object"}},
		{`{"verifiers": [{"name": "math", "report_only": true}]}`, []string{"report_only"}},
		{`{"verifiers": [{"name": "layout", "params": {"align": [{"edge": "diag", "ids": ["a","b"]}]}}]}`, []string{"align[0].edge", "allowed values: left"}},
		{`{"verifiers": [{"name": "math", "as": "a/b"}]}`, []string{"verifiers[0].as"}},
	}
	for _, c := range cases {
		var s Spec
		if err := json.Unmarshal([]byte(c.spec), &s); err != nil {
			t.Fatal(err)
		}
		err := s.Validate()
		if err == nil {
			t.Errorf("%s: want error", c.spec)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.spec, err, w)
			}
		}
	}
	ok := Spec{Verifiers: []Component{{Name: "math"}, {Name: "math", As: "math-strict", Params: json.RawMessage(`{"strict": true}`)}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid spec: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	r := Builtins()
	want := "aesthetic,choice,contains,countdown,digits,exact,format,json,layout,math,sudoku"
	if got := strings.Join(r.Names(), ","); got != want {
		t.Errorf("names = %s", got)
	}
	custom := Func(func(ctx context.Context, s Sample) (Verdict, error) {
		return Verdict{Score: 0.5, Pass: false, Feedback: "half"}, nil
	})
	if err := r.Register("half", func(json.RawMessage) (Verifier, error) { return custom, nil }); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("half", func(json.RawMessage) (Verifier, error) { return custom, nil }); err == nil {
		t.Error("duplicate register: want error")
	}
	if err := r.Register("bad name", func(json.RawMessage) (Verifier, error) { return custom, nil }); err == nil {
		t.Error("bad name: want error")
	}
	c, err := r.Compose(Spec{Verifiers: []Component{{Name: "half"}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := c.Verify(context.Background(), Sample{})
	if got.Score != 0.5 || got.Feedback != "half: half" {
		t.Errorf("custom: %+v", got)
	}
	// Replace swaps a registered factory only.
	zero := Func(func(ctx context.Context, s Sample) (Verdict, error) { return Verdict{Feedback: "zero"}, nil })
	if err := r.Replace("half", func(json.RawMessage) (Verifier, error) { return zero, nil }); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.New("half", nil); v == nil {
		t.Fatal("replaced factory: no verifier")
	} else if got, _ := v.Verify(context.Background(), Sample{}); got.Feedback != "zero" {
		t.Errorf("replaced factory: %+v", got)
	}
	if err := r.Replace("quarter", func(json.RawMessage) (Verifier, error) { return zero, nil }); err == nil {
		t.Error("replace of an unregistered name: want error")
	}
	if err := r.Replace("half", nil); err == nil {
		t.Error("replace with nil: want error")
	}
	// Out-of-range scores from a custom verifier are clamped.
	wild := Func(func(ctx context.Context, s Sample) (Verdict, error) { return Verdict{Score: math.NaN()}, nil })
	_ = r.Register("wild", func(json.RawMessage) (Verifier, error) { return wild, nil })
	c, _ = r.Compose(Spec{Verifiers: []Component{{Name: "wild"}}})
	if got, _ := c.Verify(context.Background(), Sample{}); got.Score != 0 {
		t.Errorf("NaN score not clamped: %+v", got)
	}
}
