package tasks

import (
	"reflect"
	"strings"
	"testing"
)

// TestExprSteps: solutions worked by hand.
func TestExprSteps(t *testing.T) {
	cases := []struct {
		prompt string
		want   []string
	}{
		{"(12+7)*3=", []string{"19*3", "57"}},
		{"((12+7)*3)-4=", []string{"(19*3)-4", "57-4", "53"}},
		{"(5*3)+(20-8)=", []string{"15+(20-8)", "15+12", "27"}},
		{"40-(3+(2*9))=", []string{"40-(3+18)", "40-21", "19"}},
		{"9=", []string{"9"}},
		{"2+3*4=", []string{"2+12", "14"}}, // precedence when unparenthesised
	}
	for _, c := range cases {
		got, err := ExprSteps(c.prompt)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ExprSteps(%q) = %q, %v; want %q", c.prompt, got, err, c.want)
		}
	}
	for _, bad := range []string{"(1+2=", "1+=", "1+a=", ""} {
		if _, err := ExprSteps(bad); err == nil {
			t.Errorf("ExprSteps(%q): want an error", bad)
		}
	}
}

// TestExprCheck: the per-line verifier and the whole-solution check on hand-made completions.
func TestExprCheck(t *testing.T) {
	task, err := Lookup("expr")
	if err != nil {
		t.Fatal(err)
	}
	ex := Example{Prompt: "((12+7)*3)-4=", Answer: "53", Task: "expr"}
	cases := []struct {
		completion string
		pass       bool
		feedback   string // a substring of the feedback
	}{
		{"(19*3)-4\n57-4\n53", true, ""},
		{" (19*3)-4 \n57-4\n53\n\n", true, ""},
		{"(19*3)-4\n57-4\n54", false, `line 3: "54"`},
		{"(19*3)-4\n56-4\n52", false, `line 2: "56-4"`},
		{"53", false, `line 1: "53"`}, // skipping the steps fails
		{"(19*3)-4\n57-4", false, "stops at line 2"},
		{"(19*3)-4\n57-4\n53\n53", false, "after the result"},
		{"", false, "missing"},
	}
	for _, c := range cases {
		pass, fb := task.Check(ex, c.completion)
		if pass != c.pass || !strings.Contains(fb, c.feedback) {
			t.Errorf("Check(%q) = %v %q; want %v and feedback containing %q", c.completion, pass, fb, c.pass, c.feedback)
		}
	}
	sp := task.(Scratchpad)
	if ok, _ := sp.CheckStep(ex, []string{"(19*3)-4"}, "57-4"); !ok {
		t.Error("CheckStep rejects a right second line")
	}
	if ok, _ := sp.CheckStep(ex, nil, "(20*3)-4"); ok {
		t.Error("CheckStep accepts a wrong first line")
	}
}

// TestExprExamples: generated examples are their own reference solution, numbers stay non-negative,
// and the draws cover 2 and 3 operations and every operator.
func TestExprExamples(t *testing.T) {
	task, _ := Lookup("expr")
	lines := map[int]int{}
	ops := map[byte]bool{}
	for _, ex := range Generate(task, 500, 3, 0) {
		if ok, fb := task.Check(ex, ex.Completion); !ok {
			t.Fatalf("%q: own completion %q fails: %s", ex.Prompt, ex.Completion, fb)
		}
		if strings.Contains(ex.Completion, "--") || strings.HasPrefix(ex.Answer, "-") {
			t.Fatalf("%q: a negative number in %q", ex.Prompt, ex.Completion)
		}
		lines[strings.Count(ex.Completion, "\n")+1]++
		for _, c := range []byte("+-*") {
			if strings.IndexByte(ex.Prompt, c) >= 0 {
				ops[c] = true
			}
		}
		if m := task.(Mistaker).Mistake(ex, NewRNG(1, 1)); m == ex.Completion || passes(task, ex, m) {
			t.Fatalf("%q: mistake %q passes", ex.Prompt, m)
		}
		if len(ex.Prompt)+len(ex.Completion) > 48 {
			t.Fatalf("%q → %q: longer than 48 bytes", ex.Prompt, ex.Completion)
		}
	}
	if lines[2] == 0 || lines[3] == 0 || len(lines) != 2 || len(ops) != 3 {
		t.Errorf("line counts %v, operators %v: want 2- and 3-step solutions with + - *", lines, ops)
	}
}

func passes(t Task, ex Example, completion string) bool {
	ok, _ := t.Check(ex, completion)
	return ok
}
