package verify

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// verifyCase is one completion for a built-in verifier with its params and reference (JSON).
type verifyCase struct {
	verifier, params, reference, completion string
}

// run builds the verifier (a bad name or params fails t) and verifies the completion.
func (c verifyCase) run(t *testing.T) (Verdict, error) {
	t.Helper()
	v, err := Builtins().New(c.verifier, json.RawMessage(c.params))
	if err != nil {
		t.Fatalf("%s %s: %v", c.verifier, c.params, err)
	}
	return v.Verify(context.Background(), Sample{Completion: c.completion, Reference: json.RawMessage(c.reference)})
}

// TestLooksRightButWrong gives every verifier completions built to look right while being
// wrong (a hedge, a near miss, a second answer, a reused number, a nested or renamed tag…).
// None may pass.
func TestLooksRightButWrong(t *testing.T) {
	cases := []verifyCase{
		// math
		{"math", `{}`, `{"answer": "3"}`, `<answer>3</answer><answer>4</answer>`},
		{"math", `{}`, `{"answer": "3"}`, `\boxed{3} or \boxed{4}`},
		{"math", `{}`, `{"answer": "3"}`, `\boxed{3, 4}`},
		{"math", `{}`, `{"answer": "3"}`, `\boxed{3 \text{ or } 4}`},
		{"math", `{}`, `{"answer": "3"}`, `It is 3, or maybe 4.`},
		{"math", `{}`, `{"answer": "3"}`, `The answer is not 3.`},
		{"math", `{}`, `{"answer": "3"}`, `\boxed{-3}`},
		{"math", `{}`, `{"answer": "3"}`, `\boxed{3\pi}`},
		{"math", `{}`, `{"answer": "3"}`, `\boxed{\sqrt{3}}`},
		{"math", `{}`, `{"answer": "3"}`, `x3`},
		{"math", `{}`, `{"answer": "3"}`, `\boxed{x = 3 \pm 1}`},
		{"math", `{"strict": true}`, `{"answer": "3"}`, `The final answer is 3.`},
		{"math", `{}`, `{"answer": "x > 3"}`, `\boxed{x \geq 3}`},
		{"math", `{}`, `{"answer": "x + y = 1"}`, `\boxed{x + y = -1}`},
		{"math", `{}`, `{"answer": "(1, 2)"}`, `\boxed{[1, 2]}`},
		{"math", `{}`, `{"answer": "\\{1, 2\\}"}`, `\boxed{\{1, 2, 3\}}`},
		{"math", `{}`, `{"answer": "0.5"}`, `\boxed{0.51}`},
		{"math", `{"percent": "value"}`, `{"answer": "25"}`, `\boxed{25\%}`},
		// format
		{"format", `{"tags": ["think", "answer"], "ordered": true}`, ``, `<answer>4</answer><think>x</think>`},
		{"format", `{"tags": ["think", "answer"]}`, ``, `<think> </think><answer>4</answer>`},
		{"format", `{"tags": ["think", "answer"]}`, ``, `<think>x<answer>4</answer></think>`},
		{"format", `{"tags": ["think", "answer"]}`, ``, `<think>x</think><answer>4</answer><answer>5</answer>`},
		{"format", `{"tags": ["answer"]}`, ``, `&lt;answer&gt;4&lt;/answer&gt;`},
		{"format", `{"tags": ["answer"]}`, ``, `<answer >4</answer>`},
		{"format", `{"tags": ["answer"]}`, ``, `<answer>4<answer>`},
		{"format", `{"sections": ["## Plan"]}`, ``, "intro ## Plan\nsteps"},
		{"format", `{"sections": ["## Plan"]}`, ``, "## Planning\nsteps"},
		{"format", `{"max_chars": 5}`, ``, "héllo!"},
		{"format", `{"forbid_regex": ["(?i)as an ai"]}`, ``, "As An AI, I think 4"},
		// json
		{"json", `{"schema": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}}`, ``, `{"a": "1"}`},
		{"json", `{"schema": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}}`, ``, `{"a": 1.5}`},
		{"json", `{"schema": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}}`, ``, `{"a": NaN}`},
		{"json", `{"schema": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}}`, ``, `{"a": "x", "a": 1}`},
		{"json", `{"schema": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}}`, ``, `{"b": 1}`},
		{"json", `{"schema": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}}`, ``, `{"a": 1} {"a": "x"}`},
		{"json", `{"schema": {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}}`, ``, `{"email": "not an email"}`},
		{"json", `{"schema": {"type": "array", "maxItems": 2}, "tag": "json"}`, ``, `<json>[1, 2]</json><json>[1, 2, 3]</json>`},
		// layout
		{"layout", `{"canvas": {"w": 100, "h": 100}, "ids": ["a", "b"]}`, ``, `[{"id": "a", "x": 0, "y": 0, "w": 50, "h": 50}, {"id": "b", "x": 49, "y": 0, "w": 50, "h": 50}]`},
		{"layout", `{"canvas": {"w": 100, "h": 100}, "ids": ["a", "b"]}`, ``, `[{"id": "a", "x": 0, "y": 0, "w": 50, "h": 50}, {"id": "b", "x": 60, "y": 0, "w": 50, "h": 50}]`},
		{"layout", `{"canvas": {"w": 100, "h": 100}, "ids": ["a", "b"]}`, ``, `[{"id": "a", "x": 0, "y": 0, "w": 50, "h": 50}, {"id": "b", "x": 50, "y": 60, "w": -10, "h": 10}]`},
		{"layout", `{"canvas": {"w": 100, "h": 100}, "ids": ["a", "b"]}`, ``, `[{"id": "a", "x": 0, "y": 0, "w": 50, "h": 50}, {"id": "a", "x": 50, "y": 60, "w": 10, "h": 10}]`},
		{"layout", `{"canvas": {"w": 100, "h": 100}, "ids": ["a", "b"]}`, ``, `[{"id": "a", "x": 0, "y": 0, "w": 50, "h": 50}, {"id": "b", "x": 60, "y": 60, "w": 10, "h": 10}, {"id": "c", "x": 80, "y": 0, "w": 1, "h": 1}]`},
		{"layout", `{"canvas": {"w": 100, "h": 100}, "ids": ["a", "b"]}`, ``, `[{"id": "a", "x": 0, "y": 0, "w": 50, "h": 50}, {"id": "b", "x": "60", "y": 60, "w": 10, "h": 10}]`},
		{"layout", `{"canvas": {"w": 100, "h": 100}, "ids": ["a", "b"]}`, ``, `[{"id": "a", "x": 0, "y": 0, "w": 50, "h": 50}, {"id": "b", "x": 1e308, "y": 60, "w": 1e308, "h": 10}]`},
		{"layout", `{"canvas": {"w": 100, "h": 100}, "order": ["a", "b"]}`, ``, `[{"id": "b", "x": 0, "y": 0, "w": 10, "h": 10}, {"id": "a", "x": 0, "y": 20, "w": 10, "h": 10}]`},
		{"layout", `{"canvas": {"w": 100, "h": 100}, "ids": ["a"], "margin": 5}`, ``, `[{"id": "a", "x": 2, "y": 10, "w": 10, "h": 10}]`},
		// countdown
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>(25-4)*8/8</answer>`},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>24</answer>`},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>25-1</answer>`},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>8*3.0</answer>`},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>-(-24)</answer>`},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>8*3</answer><answer>25-4+3+1</answer>`},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `8*3 or 25-4+3`},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>25-4+3+8-8</answer>`},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>(25-4)+3 = 24 = 8*3</answer>`},
		{"countdown", `{"use_all": true}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>8*3</answer>`},
		{"countdown", `{}`, `{"numbers": [2, 5], "target": 25}`, `<answer>25</answer>`},
		// sudoku
		{"sudoku", `{}`, `{"givens": "1.3..4.22.4..3.1"}`, "1234\n3412\n2341\n4123"},
		{"sudoku", `{}`, `{"givens": "1.3..4.22.4..3.1"}`, "1234\n3412\n2.4.\n4321"},
		{"sudoku", `{}`, `{"givens": "1.3..4.22.4..3.1"}`, "<answer>1234\n3412\n2143\n4321</answer><answer>1234</answer>"},
		{"sudoku", `{}`, `{"givens": "1.3..4.22.4..3.1"}`, "[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,5]]"},
		{"sudoku", `{}`, `{"givens": "1.3..4.22.4..3.1"}`, "1234\n3412\n2143\n4321\nor:\n1234\n3412\n2143\n4312"},
		// digits
		{"digits", `{}`, `{"answer": "62"}`, "63"},
		{"digits", `{}`, `{"answer": "62"}`, "620"},
		{"digits", `{}`, `{"answer": "62"}`, "62.5"},
		{"digits", `{}`, `{"answer": "62"}`, "-62"},
		{"digits", `{}`, `{"answer": "62"}`, "6 2"},
		{"digits", `{}`, `{"answer": "62"}`, "sixty-two"},
		{"digits", `{}`, `{"answer": "62"}`, "The result is 62"},
		// choice
		{"choice", `{}`, `{"answer": "B"}`, `<answer>B or C</answer>`},
		{"choice", `{}`, `{"answer": "B"}`, `<answer>B, C</answer>`},
		{"choice", `{}`, `{"answer": "B"}`, `<answer>B</answer><answer>C</answer>`},
		{"choice", `{}`, `{"answer": "B"}`, `The answer is B. No wait, the answer is C.`},
		{"choice", `{}`, `{"answer": "B"}`, `A B C D`},
		{"choice", `{}`, `{"answer": "B"}`, `<answer>E</answer>`},
		{"choice", `{}`, `{"answer": "B"}`, `\boxed{B} \boxed{D}`},
		{"choice", `{}`, `{"answer": "B"}`, `<answer>Both B and C</answer>`},
		// exact
		{"exact", `{}`, `{"answer": "Paris"}`, `<answer>Paris, or maybe London</answer>`},
		{"exact", `{}`, `{"answer": "Paris"}`, `<answer>Not Paris</answer>`},
		{"exact", `{}`, `{"answer": "Paris"}`, `<answer>Paris</answer><answer>London</answer>`},
		{"exact", `{}`, `{"answer": "12"}`, `<answer>1.2</answer>`},
		{"exact", `{}`, `{"answer": "Paris"}`, `<answer>Parisian</answer>`},
		// contains
		{"contains", `{}`, `{"answer": "12"}`, `The total is 120.`},
		{"contains", `{}`, `{"answer": "12"}`, `The total is 12.5.`},
		{"contains", `{}`, `{"answer": "12"}`, `The total is -12.`},
		{"contains", `{}`, `{"answer": "12"}`, `The total is 12,000.`},
		{"contains", `{}`, `{"answer": "12"}`, `The total is 1/12.`},
		{"contains", `{}`, `{"answer": "12"}`, `The total is 3.12.`},
		{"contains", `{}`, `{"answer": "cat"}`, `a concatenation`},
	}
	for _, c := range cases {
		got, err := c.run(t)
		if err != nil {
			t.Errorf("%s: %q: error %v", c.verifier, c.completion, err)
			continue
		}
		if got.Pass || got.Score == 1 {
			t.Errorf("%s %s: looks right but is wrong, yet passed: %q", c.verifier, c.params, strings.ReplaceAll(c.completion, "\n", `\n`))
		}
	}
}

// TestHardeningKeepsRightAnswers: the checks added against look-alikes still pass the right
// answers next to them.
func TestHardeningKeepsRightAnswers(t *testing.T) {
	cases := []verifyCase{
		{"format", `{"tags": ["think", "answer"], "ordered": true}`, ``, `<think>x</think><answer>4</answer>`},
		{"format", `{"sections": ["## Plan"]}`, ``, "## Plan: steps\nmore"},
		{"format", `{"sections": ["## Plan"]}`, ``, "  ## Plan\nsteps"},
		{"json", `{"schema": {"type": "array", "items": {"type": "object"}}}`, ``, `[{"a": 1}, {"a": 2, "b": {"a": 3}}]`},
		{"choice", `{}`, `{"answer": "B"}`, `<answer>B) because A is wrong</answer>`},
		{"choice", `{}`, `{"answer": "B"}`, `<answer>(B)</answer>`},
		{"contains", `{}`, `{"answer": "12"}`, `The total is 12.`},
		{"contains", `{}`, `{"answer": "12"}`, `Totals: 12, 13`},
		{"contains", `{}`, `{"answer": "-12"}`, `The total is -12.`},
		{"sudoku", `{}`, `{"givens": "1.3..4.22.4..3.1"}`, "1324\n3412\n2143\n4231\nfixed:\n1234\n3412\n2143\n4321"},
		{"countdown", `{}`, `{"numbers": [25, 4, 8, 3], "target": 24}`, `<answer>25-4+3</answer>`},
	}
	for _, c := range cases {
		got, err := c.run(t)
		if err != nil || !got.Pass {
			t.Errorf("%s %s: right answer %q failed: %+v %v", c.verifier, c.params, c.completion, got, err)
		}
	}
}
