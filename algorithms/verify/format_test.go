package verify

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	r1, err := NewFormat(json.RawMessage(`{"tags": ["think", "answer"], "ordered": true}`))
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := NewFormat(json.RawMessage(`{"sections": ["## Plan", "## Code"], "regex": ["(?m)^Final: \\d+$"], "forbid_regex": ["(?i)as an ai"], "max_chars": 200}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		v          Verifier
		completion string
		score      float64
		feedback   string
	}{
		{"r1 ok", r1, "<think>hmm</think>\n<answer>4</answer>", 1, ""},
		{"r1 wrong order", r1, "<answer>4</answer><think>hmm</think>", 2.0 / 3, "order"},
		{"r1 missing think", r1, "<answer>4</answer>", 1.0 / 3, "missing <think>"},
		{"r1 duplicate answer", r1, "<think>a</think><answer>4</answer><answer>5</answer>", 1.0 / 3, "appears 2 times"},
		{"r1 empty answer", r1, "<think>a</think><answer> </answer>", 1.0 / 3, "is empty"},
		{"r1 unclosed", r1, "<think>a</think><answer>4", 1.0 / 3, "never closed"},
		{"r1 empty output", r1, "", 0, "missing"},
		{"mixed ok", mixed, "## Plan\ndo it\n  ## Code\nx\nFinal: 42", 1, ""},
		{"mixed missing section", mixed, "## Plan\nFinal: 42", 4.0 / 5, `missing section "## Code"`},
		{"mixed regex", mixed, "## Plan\n## Code\nFinal: forty", 4.0 / 5, "required pattern"},
		{"mixed forbidden", mixed, "## Plan\n## Code\nAs an AI\nFinal: 1", 4.0 / 5, "forbidden"},
		{"mixed too long", mixed, "## Plan\n## Code\nFinal: 1\n" + strings.Repeat("x", 300), 4.0 / 5, "at most 200"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustVerify(t, c.v, c.completion, nil)
			if math.Abs(got.Score-c.score) > 1e-12 || got.Pass != (c.score == 1) {
				t.Fatalf("got %+v, want score %v", got, c.score)
			}
			if c.feedback != "" && !strings.Contains(got.Feedback, c.feedback) {
				t.Errorf("feedback %q does not contain %q", got.Feedback, c.feedback)
			}
		})
	}
	for _, p := range []string{`{"regex": ["("]}`, `{"tags": ["a b"]}`, `{"max_chars": -1}`, `{"tag": ["x"]}`} {
		if _, err := NewFormat(json.RawMessage(p)); err == nil {
			t.Errorf("params %s: want error", p)
		}
	}
	empty, _ := NewFormat(nil)
	if _, err := empty.Verify(t.Context(), Sample{Completion: "x"}); err == nil {
		t.Error("format with no checks: want error")
	}
	// Checks may come with the sample.
	got := mustVerify(t, empty, "<a>1</a>", json.RawMessage(`{"tags": ["a"]}`))
	if !got.Pass {
		t.Errorf("per-sample tags: %+v", got)
	}
}

const personSchema = `{
  "type": "object",
  "required": ["name", "age", "tags"],
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "age": {"type": "integer", "minimum": 0},
    "email": {"type": "string", "format": "email"},
    "tags": {"type": "array", "items": {"type": "string"}}
  },
  "additionalProperties": false
}`

func TestJSONSchema(t *testing.T) {
	v, err := NewJSON(json.RawMessage(`{"schema": ` + personSchema + `}`))
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := NewJSON(json.RawMessage(`{"tag": "json", "schema": ` + personSchema + `}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		v          Verifier
		completion string
		pass       bool
		parse      float64
		feedback   string
	}{
		{"valid", v, `{"name": "Ada", "age": 36, "tags": []}`, true, 1, ""},
		{"fenced", v, "Here:\n```json\n{\"name\": \"Ada\", \"age\": 36, \"tags\": [\"x\"]}\n```\n", true, 1, ""},
		{"embedded", v, `Result: {"name": "Ada", "age": 36, "tags": []} done`, true, 1, ""},
		{"tagged", tagged, `<json>{"name": "Ada", "age": 36, "tags": []}</json>`, true, 1, ""},
		{"missing property", v, `{"name": "Ada", "tags": []}`, false, 1, "at (root)"},
		{"wrong nested type", v, `{"name": "Ada", "age": 3, "tags": ["a", 2]}`, false, 1, "at /tags/1"},
		{"negative age", v, `{"name": "Ada", "age": -1, "tags": []}`, false, 1, "at /age"},
		{"float age", v, `{"name": "Ada", "age": 1.5, "tags": []}`, false, 1, "at /age"},
		{"bad email", v, `{"name": "Ada", "age": 1, "tags": [], "email": "nope"}`, false, 1, "at /email"},
		{"extra property", v, `{"name": "Ada", "age": 1, "tags": [], "x": 1}`, false, 1, "x"},
		{"not json", v, `{"name": "Ada", "age": }`, false, 0, "not valid JSON"},
		{"trailing garbage", v, `{"name": "Ada", "age": 1, "tags": []}{}`, false, 0, ""},
		{"empty", v, ``, false, 0, "empty"},
		{"tag missing", tagged, `{"name": "Ada", "age": 36, "tags": []}`, false, 0, "no <json>"},
		{"deep", v, strings.Repeat("[", 20000) + strings.Repeat("]", 20000), false, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustVerify(t, c.v, c.completion, nil)
			if got.Pass != c.pass {
				t.Fatalf("got %+v, want pass=%v", got, c.pass)
			}
			if got.Partial["parse"] != c.parse {
				t.Errorf("partial parse = %v, want %v", got.Partial["parse"], c.parse)
			}
			if c.feedback != "" && !strings.Contains(got.Feedback, c.feedback) {
				t.Errorf("feedback %q does not contain %q", got.Feedback, c.feedback)
			}
		})
	}
	// Per-sample schema, and refusal of external references.
	perSample, _ := NewJSON(nil)
	got := mustVerify(t, perSample, `[1, 2]`, json.RawMessage(`{"schema": {"type": "array", "maxItems": 1}}`))
	if got.Pass {
		t.Errorf("per-sample schema ignored: %+v", got)
	}
	if _, err := perSample.Verify(t.Context(), Sample{Completion: "1"}); err == nil {
		t.Error("no schema anywhere: want error")
	}
	if _, err := NewJSON(json.RawMessage(`{"schema": {"$ref": "file:///etc/passwd"}}`)); err == nil {
		t.Error("external $ref: want error")
	}
	if _, err := NewJSON(json.RawMessage(`{"schema": {"type": "strnig"}}`)); err == nil {
		t.Error("invalid schema: want error")
	}
	noFormat, _ := NewJSON(json.RawMessage(`{"ignore_format": true, "schema": ` + personSchema + `}`))
	if got := mustVerify(t, noFormat, `{"name": "Ada", "age": 1, "tags": [], "email": "nope"}`, nil); !got.Pass {
		t.Errorf("ignore_format: %+v", got)
	}
}
