package tasks

import (
	"strings"
	"testing"
)

// TestLabelSteps: labels are the per-line checker's verdicts made monotone (after the first wrong
// step every label is false), hand-checked on expr.
func TestLabelSteps(t *testing.T) {
	task, _ := Lookup("expr")
	sw := task.(Stepwise)
	ex := Example{Prompt: "((2+7)*3)-4=", Answer: "23"}
	for _, c := range []struct {
		completion string
		want       []bool
	}{
		{"(9*3)-4\n27-4\n23", []bool{true, true, true}},
		{"(9*3)-4\n28-4\n24", []bool{true, false, false}},
		{"(8*3)-4\n27-4\n23", []bool{false, false, false}}, // right lines after a wrong one stay false
		{"(9*3)-4\n27-4\n23\n23", []bool{true, true, true, false}},
	} {
		got := LabelSteps(sw, ex, c.completion)
		if strings.Join(got.Steps, "\n") != c.completion || len(got.Labels) != len(c.want) {
			t.Fatalf("%q: %+v", c.completion, got)
		}
		for i := range c.want {
			if got.Labels[i] != c.want[i] {
				t.Errorf("%q: labels %v, want %v", c.completion, got.Labels, c.want)
				break
			}
		}
	}
}

// TestStepSplit: every example's reference solution is all true, its slipped twin has a false
// label, and both sets are functions of the seed.
func TestStepSplit(t *testing.T) {
	task, _ := Lookup("expr")
	tr, he, err := StepSplit(task, 50, 20, 7)
	if err != nil || len(tr) != 100 || len(he) != 40 {
		t.Fatalf("%d train, %d held-out, %v", len(tr), len(he), err)
	}
	for i := 0; i < len(tr); i += 2 {
		good, bad := tr[i], tr[i+1]
		for _, l := range good.Labels {
			if !l {
				t.Fatalf("reference solution labelled wrong: %+v", good)
			}
		}
		if bad.Labels[len(bad.Labels)-1] {
			t.Errorf("slipped solution labelled right: %+v", bad)
		}
		if err := bad.Check(); err != nil {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	again, _, _ := StepSplit(task, 50, 20, 7)
	for i := range tr {
		if strings.Join(tr[i].Steps, "|") != strings.Join(again[i].Steps, "|") {
			t.Fatalf("not a function of the seed: %v vs %v", tr[i], again[i])
		}
	}
}

// TestReadStepJSONLErrors: a malformed line names file, line and field.
func TestReadStepJSONLErrors(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"prompt":"1+2=","steps":["3"],"labels":[true,false]}`, `steps.jsonl:2: "labels": 2 labels for 1 steps`},
		{`{"prompt":"1+2=","steps":[],"labels":[]}`, `steps.jsonl:2: "steps": at least one step`},
		{`{"steps":["3"],"labels":[true]}`, `steps.jsonl:2: "prompt" is required`},
		{`{"prompt":"1+2=","steps":["3\n4"],"labels":[true]}`, `steps.jsonl:2: "steps"[0]: a step is one line`},
		{`{"prompt":"1+2=","step":["3"],"labels":[true]}`, `steps.jsonl:2: unknown field "step"; did you mean "steps"?`},
		{`{"prompt":"1+2=","steps":["3"],"labels":["yes"]}`, `steps.jsonl:2: invalid JSON`},
	} {
		in := `{"prompt":"1+1=","steps":["2"],"labels":[true]}` + "\n" + c.line + "\n"
		_, err := ReadStepAll(strings.NewReader(in), "steps.jsonl")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.line, err, c.want)
		}
	}
	var b strings.Builder
	exs := []StepExample{{Prompt: "1+1=", Steps: []string{"2"}, Labels: []bool{true}}}
	if err := WriteStepJSONL(&b, exs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadStepAll(strings.NewReader(b.String()), "x")
	if err != nil || len(back) != 1 || back[0].Steps[0] != "2" || !back[0].Labels[0] {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}
