package tasks

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
)

// StepExample is one line of a step-labelled dataset (what a process reward model trains on): a
// prompt, a solution as its steps (one line each, without the newline) and a label per step:
//
//	{"prompt": "((2+7)*3)-4=", "steps": ["(9*3)-4", "28-4", "24"], "labels": [true, false, false]}
//
// A step is labelled true when it and every step before it are right: after the first wrong step
// every label is false, so the minimum of a solution's step labels is its correctness. Answer is the
// reference answer (optional); Task names the built-in task whose checker made the labels.
type StepExample struct {
	ID     string   `json:"id,omitempty"`
	Task   string   `json:"task,omitempty"`
	Prompt string   `json:"prompt"`
	Steps  []string `json:"steps"`
	Labels []bool   `json:"labels"`
	Answer string   `json:"answer,omitempty"`
}

// Check returns an error naming the field of a line that is not a usable step-labelled solution.
func (e StepExample) Check() error {
	switch {
	case e.Prompt == "":
		return errors.New(`"prompt" is required`)
	case len(e.Steps) == 0:
		return errors.New(`"steps": at least one step is required`)
	case len(e.Labels) != len(e.Steps):
		return fmt.Errorf(`"labels": %d labels for %d steps (one true/false per step)`, len(e.Labels), len(e.Steps))
	}
	for i, s := range e.Steps {
		if strings.Contains(s, "\n") {
			return fmt.Errorf(`"steps"[%d]: a step is one line (it contains a newline)`, i)
		}
	}
	return nil
}

var stepFields = fieldNames(reflect.TypeOf(StepExample{}))

// ReadStepJSONL calls fn for every step-labelled example of r in order. name labels errors. Blank
// lines are skipped; a malformed line stops the read with a *LineError naming file, line and field.
func ReadStepJSONL(r io.Reader, name string, fn func(line int, ex StepExample) error) error {
	return readLines(r, name, checkedLine[StepExample](stepFields), fn)
}

// ReadStepAll reads every step-labelled example of r.
func ReadStepAll(r io.Reader, name string) ([]StepExample, error) {
	return readAll(r, name, checkedLine[StepExample](stepFields))
}

// WriteStepJSONL writes one step-labelled example per line.
func WriteStepJSONL(w io.Writer, exs []StepExample) error {
	return writeLines(w, "step example", exs)
}

// SolutionSteps splits a completion into its steps: its lines, trimmed, without trailing blank ones.
func SolutionSteps(completion string) []string { return completionLines(completion) }

// LabelSteps labels a completion of ex step by step with the task's per-line checker: step i is
// true when CheckStep passes it and every step before it.
func LabelSteps(sw Stepwise, ex Example, completion string) StepExample {
	steps := SolutionSteps(completion)
	out := StepExample{ID: ex.ID, Task: ex.Task, Prompt: ex.Prompt, Steps: steps, Labels: make([]bool, len(steps)), Answer: ex.Answer}
	for i, s := range steps {
		ok, _ := sw.CheckStep(ex, steps[:i], s)
		out.Labels[i] = ok && (i == 0 || out.Labels[i-1])
	}
	return out
}

// StepSplit draws step-labelled data from a task whose lines are checkable (Stepwise): for every
// example of Split's train and held-out sets, its reference solution (every step right) and a
// solution with one step slipped (a digit changed, the steps after it computed from the slip's
// text where they parse, else cut), labelled with LabelSteps. Both sets are functions of seed.
func StepSplit(t Task, nTrain, nHeldout int, seed uint64) (train, heldout []StepExample, err error) {
	sw, ok := t.(Stepwise)
	if !ok {
		return nil, nil, fmt.Errorf("tasks: %s does not check single steps, so it has no synthetic step labels", t.Name())
	}
	tr, he := Split(t, nTrain, nHeldout, seed)
	label := func(exs []Example, rng *rand.Rand) []StepExample {
		out := make([]StepExample, 0, 2*len(exs))
		for _, ex := range exs {
			ex.Task = t.Name()
			out = append(out, LabelSteps(sw, ex, ex.Completion))
			bad := LabelSteps(sw, ex, slipStep(ex, rng))
			bad.ID = ex.ID + "-slip"
			out = append(out, bad)
		}
		return out
	}
	return label(tr, NewRNG(seed, 4)), label(he, NewRNG(seed, 5)), nil
}

// slipStep returns ex's solution with one step's digit changed at random; the steps after it
// continue from the slipped expression when it parses (a wrong step followed by consistent ones,
// the common failure of a model), and the solution stops there when it does not.
func slipStep(ex Example, rng *rand.Rand) string {
	steps := SolutionSteps(ex.Completion)
	if len(steps) == 0 {
		return "0"
	}
	k := rng.IntN(len(steps))
	s := []byte(steps[k])
	var digits []int
	for i, c := range s {
		if c >= '0' && c <= '9' {
			digits = append(digits, i)
		}
	}
	if len(digits) == 0 {
		return strings.Join(append(steps[:k:k], steps[k]+"0"), "\n")
	}
	i := digits[rng.IntN(len(digits))]
	lead := i == 0 || s[i-1] < '0' || s[i-1] > '9'
	for {
		d := byte('0' + (int(s[i]-'0')+1+rng.IntN(9))%10) // never the digit it replaces
		if d != '0' || !lead {                            // no leading zero: the slip stays a plain number
			s[i] = d
			break
		}
	}
	out := append(steps[:k:k], string(s))
	if rest, err := ExprSteps(string(s) + "="); err == nil && len(rest) > 0 && rest[0] != string(s) {
		out = append(out, rest...)
	}
	return strings.Join(out, "\n")
}
