package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// watchdog crashes the fuzz worker when one input runs away, so the fuzzer saves it.
func watchdog(input string) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			panic(fmt.Sprintf("ran over 10s on input %q", clip(input, 300)))
		}
	}()
	return func() { close(done) }
}

// The fuzz targets check that no parser panics or runs away on model output, and that verdicts
// stay in range. Run longer with: go test -run XXX -fuzz FuzzVerifiers ./algorithms/verify/

var fuzzSeeds = []string{
	"", "42", "<answer>1/2</answer>", `\boxed{\frac{1}{2}}`, "#### 3", "1e999999", "10^10^10",
	`\boxed{\frac{\frac{1}{2}}{`, "<answer><answer>", "((((((((1))))))))", "1,234,567.89", "-.5e-3",
	"3 \\times 4 \\div 0", "<answer>NaN</answer>", "```json\n{\"a\": [1, {\"b\": null}]}\n```",
	`[{"id": "a", "x": 1, "y": 2, "w": 3, "h": 4}]`, "1234\n3412\n2143\n4321", "(25-4)*8/8",
	"\xff\xfe<answer>\x00</answer>", `\frac12^-3`, "2^-4096", "0^0", `\boxed`, "<think></think>",
}

func FuzzEvalExpr(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		defer watchdog(s)()
		for _, mode := range []exprMode{modeMath, modeCountdown} {
			v, _, err := evalExpr(s, mode)
			if err == nil && (v.Num().BitLen() > maxBits || v.Denom().BitLen() > maxBits) {
				t.Fatalf("evalExpr(%q) exceeded the bit bound", s)
			}
		}
		_ = parseValue(s, false)
		_, _ = readReference(s)
		_, _ = boxedContents(s)
		_, _ = tagContents(s, "answer")
		_ = hashAnswers(s)
		_, _ = proseAnswer(s, MathParams{Tolerance: 1e-6})
		_, _ = jsonText(s, "")
	})
}

func FuzzVerifiers(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	specs := []struct {
		name, params, reference string
	}{
		{"math", `{}`, `{"answer": "1/2"}`},
		{"math", `{"strict": true}`, `{"answer": "\\infty"}`},
		{"format", `{"tags": ["think", "answer"], "ordered": true, "regex": ["\\d+"]}`, ``},
		{"json", `{"schema": {"type": "object", "properties": {"a": {"type": "array"}}}}`, ``},
		{"layout", `{"canvas": {"w": 10, "h": 10}, "ids": ["a"], "order": ["a", "b"], "margin": 1, "gap": 1}`, ``},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`},
		{"sudoku", `{}`, `{"givens": "1.3..4.22.4..3.1"}`},
		{"exact", `{}`, `{"answer": "Paris"}`},
		{"contains", `{}`, `{"answer": "12"}`},
		{"choice", `{}`, `{"answer": "B"}`},
	}
	r := Builtins()
	var vs []Verifier
	var refs []json.RawMessage
	for _, s := range specs {
		v, err := r.New(s.name, json.RawMessage(s.params))
		if err != nil {
			f.Fatal(err)
		}
		vs = append(vs, v)
		refs = append(refs, json.RawMessage(s.reference))
	}
	f.Fuzz(func(t *testing.T, completion string) {
		defer watchdog(completion)()
		for i, v := range vs {
			got, err := v.Verify(context.Background(), Sample{Completion: completion, Reference: refs[i]})
			if err != nil {
				t.Fatalf("%s: error on model output %q: %v", specs[i].name, completion, err)
			}
			if got.Score < 0 || got.Score > 1 || got.Pass && got.Score != 1 {
				t.Fatalf("%s: verdict out of range: %+v", specs[i].name, got)
			}
			if !utf8.ValidString(completion) {
				continue
			}
			if len(got.Feedback) > maxFeedback {
				t.Fatalf("%s: feedback too long (%d)", specs[i].name, len(got.Feedback))
			}
		}
	})
}

// TestLargeInputsStayLinear feeds every verifier megabyte-sized pathological completions (the
// most a composition reads): a quadratic scan would take minutes here.
func TestLargeInputsStayLinear(t *testing.T) {
	const n = MaxCompletionBytes
	rep := func(s string) string { return strings.Repeat(s, n/len(s)) }
	inputs := map[string]string{
		"boxed":      rep(`\boxed{1}`),
		"fbox boxed": rep(`\fbox{1}\boxed{1}`),
		"open boxed": rep(`\boxed{`),
		"tags":       rep("<answer>1</answer>"),
		"open tags":  rep("<answer>"),
		"angles":     rep("<"),
		"hashes":     rep("#### 1\n"),
		"braces":     rep("{"),
		"brackets":   rep("["),
		"digits":     rep("1234567890"),
		"fences":     rep("```\n"),
		"lines":      rep("1 2 3 4\n"),
		"answer is":  rep("answer is A "),
		"json":       "[" + strings.TrimSuffix(rep(`{"id": "a", "x": 1, "y": 1, "w": 1, "h": 1},`), ",") + "]",
	}
	r := Builtins()
	spec := Spec{}
	for _, name := range r.Names() {
		if name == "digits" { // needs an integer answer; checked on its own below
			continue
		}
		params := map[string]string{
			"format": `{"tags": ["think", "answer"], "sections": ["## A"], "regex": ["(a|b)*c"]}`,
			"json":   `{"schema": {"type": "array", "items": {"type": "object"}}}`,
			"layout": `{"canvas": {"w": 10, "h": 10}, "ids": ["a", "b"], "gap": 1}`,
		}[name]
		if params == "" {
			params = "{}"
		}
		spec.Verifiers = append(spec.Verifiers, Component{Name: name, Params: json.RawMessage(params)})
	}
	c, err := r.Compose(spec)
	if err != nil {
		t.Fatal(err)
	}
	reference := json.RawMessage(`{"answer": "B", "numbers": [1, 2], "target": 3, "givens": "1.3..4.22.4..3.1"}`)
	for name, in := range inputs {
		start := time.Now()
		v, err := c.Verify(context.Background(), Sample{Completion: in, Reference: reference})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d := time.Since(start)
		if d > 10*time.Second {
			t.Errorf("%s: %v for %d bytes", name, d, len(in))
		}
		t.Logf("%-10s %v", name, d.Round(time.Millisecond))
		if v.Score < 0 || v.Score > 1 {
			t.Errorf("%s: score %v", name, v.Score)
		}
	}
	digits, _ := r.New("digits", nil)
	for name, in := range inputs {
		start := time.Now()
		v, err := digits.Verify(context.Background(), Sample{Completion: in, Reference: json.RawMessage(`{"answer": "1234567890"}`)})
		if err != nil || v.Score < 0 || v.Score > 1 || time.Since(start) > 10*time.Second {
			t.Errorf("digits on %s: %+v, %v, %v", name, v, err, time.Since(start))
		}
	}
}
