package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type inner struct {
	Steps int     `json:"steps" default:"10" help:"training steps"`
	LR    float64 `json:"learning_rate"`
}

type outer struct {
	Name   string          `json:"name"`
	Inner  inner           `json:"inner"`
	List   []inner         `json:"list"`
	Raw    json.RawMessage `json:"raw"`
	Wait   Duration        `json:"wait"`
	Labels map[string]int  `json:"labels"`
}

func TestDecodeStrict(t *testing.T) {
	cases := []struct {
		name, in  string
		wantPath  string
		wantInMsg string
	}{
		{"ok yaml", "name: a\ninner: {steps: 3}\nraw: {anything: 1}\nwait: 1m\n", "", ""},
		{"ok json", `{"name":"a","list":[{"steps":1}]}`, "", ""},
		{"typo top", "nmae: a\n", "nmae", `did you mean "name"?`},
		{"typo nested", "inner: {stepz: 3}\n", "inner.stepz", `did you mean "steps"?`},
		{"typo in list", "list: [{steps: 1}, {learning_rat: 1}]\n", "list[1].learning_rat", `did you mean "learning_rate"?`},
		{"no suggestion", "inner: {zzzzzzzzzz: 3}\n", "inner.zzzzzzzzzz", "unknown field (valid: steps, learning_rate)"},
		{"wrong type", "inner: {steps: many}\n", "inner.steps", "want int"},
		{"want map", "inner: 3\n", "inner", "want a map"},
		{"nan", "inner: {learning_rate: .nan}\n", "inner.learning_rate", "NaN is not a finite number"},
		{"inf in list", "list: [{steps: 1}, {learning_rate: -.inf}]\n", "list[1].learning_rate", "-Inf is not a finite number"},
		{"nan in raw", "raw: {optimizer: {lr: .NaN}}\n", "raw.optimizer.lr", "not a finite number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o outer
			err := DecodeBytes([]byte(c.in), &o, "")
			if c.wantPath == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("want *FieldError, got %v", err)
			}
			if fe.Path != c.wantPath || !strings.Contains(fe.Msg, c.wantInMsg) {
				t.Fatalf("got %q, want path %q containing %q", err, c.wantPath, c.wantInMsg)
			}
		})
	}
}

func TestSet(t *testing.T) {
	tree, err := ParseTree([]byte("phases:\n- name: sft\n  config: {steps: 1}\n- name: rl\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"phases.sft.config.steps=20", "phases.1.config.lr=0.5", "seed=7", "phases.rl.kind=grpo"} {
		if tree, err = Set(tree, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	b, _ := json.Marshal(tree)
	want := `{"phases":[{"config":{"steps":20},"name":"sft"},{"config":{"lr":0.5},"kind":"grpo","name":"rl"}],"seed":7}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
	if _, err := Set(tree, "phases.nosuch.x=1"); err == nil {
		t.Fatal("want error for missing list element")
	}
	if _, err := Set(tree, "novalue"); err == nil {
		t.Fatal("want error without =")
	}
}

func TestExplain(t *testing.T) {
	out := Explain(outer{})
	for _, want := range []string{"inner.steps", "training steps", "list[].learning_rate", "duration"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	line := func(out, path string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == path {
				return f
			}
		}
		t.Fatalf("no line for %s in:\n%s", path, out)
		return nil
	}
	// A zero value documents the tags; a constructed one its own values, zeros included.
	if f := line(out, "inner.steps"); f[2] != "10" {
		t.Errorf("zero value: inner.steps default %q, want the tag's 10", f[2])
	}
	got := Explain(outer{Name: "x", Inner: inner{Steps: 0, LR: 0.5}, Wait: Duration(90e9)})
	for path, want := range map[string]string{"inner.steps": "0", "inner.learning_rate": "0.5", "wait": "1m30s", "name": "x", "list[].steps": "10"} {
		if f := line(got, path); f[2] != want {
			t.Errorf("constructed value: %s default %q, want %q", path, f[2], want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"steps", "learning_rate", "seed"}
	for in, want := range map[string]string{"step": "steps", "sede": "seed", "lr_rate": "", "learningrate": "learning_rate"} {
		if got := Closest(in, names); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}
