package verify

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestExactContains(t *testing.T) {
	exact, _ := NewExact(nil)
	exactCase, _ := NewExact(json.RawMessage(`{"normalize": {"case_sensitive": true}}`))
	squad, _ := NewExact(json.RawMessage(`{"normalize": {"strip_punctuation": true, "strip_articles": true}}`))
	whole, _ := NewExact(json.RawMessage(`{"tag": "-"}`))
	contains, _ := NewContains(nil)
	anyPos, _ := NewContains(json.RawMessage(`{"any_position": true}`))
	cases := []struct {
		name       string
		v          Verifier
		reference  string
		completion string
		pass       bool
	}{
		{"exact equal", exact, `{"answer": "Paris"}`, "Paris", true},
		{"exact case folded", exact, `{"answer": "Paris"}`, "  paris. ", true},
		{"exact quotes trimmed", exact, `{"answer": "Paris"}`, `"Paris"`, true},
		{"exact tag", exact, `{"answer": "Paris"}`, "I think <answer>Paris</answer>", true},
		{"exact number ref", exact, `{"answer": 12}`, "<answer>12</answer>", true},
		{"exact 12 vs 1.2", exact, `{"answer": "12"}`, "1.2", false},
		{"exact 12 vs 120", exact, `{"answer": "12"}`, "120", false},
		{"exact alternatives", exact, `{"answers": ["NYC", "New York City"]}`, "new york city", true},
		{"exact wrong", exact, `{"answer": "Paris"}`, "Lyon", false},
		{"exact extra words", exact, `{"answer": "Paris"}`, "It is Paris", false},
		{"exact case sensitive", exactCase, `{"answer": "Paris"}`, "paris", false},
		{"squad articles", squad, `{"answer": "the Eiffel Tower"}`, "Eiffel tower!", true},
		{"exact hedged tags", exact, `{"answer": "A"}`, "<answer>A</answer><answer>B</answer>", false},
		{"exact empty", exact, `{"answer": "A"}`, "", false},
		{"whole ignores tag", whole, `{"answer": "x"}`, "<answer>x</answer>", false},
		{"contains token", contains, `{"answer": "Paris"}`, "The capital is Paris, of course.", true},
		{"contains 12 in 120", contains, `{"answer": "12"}`, "I count 120 items", false},
		{"contains 12 alone", contains, `{"answer": "12"}`, "I count 12 items", true},
		{"contains glued any", anyPos, `{"answer": "12"}`, "I count 120 items", true},
		{"contains missing", contains, `{"answer": "Rome"}`, "The capital is Paris", false},
		{"contains multiword", contains, `{"answer": "new york"}`, "I love New  York!", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustVerify(t, c.v, c.completion, json.RawMessage(c.reference))
			if got.Pass != c.pass || (got.Score == 1) != c.pass {
				t.Fatalf("got %+v, want pass=%v", got, c.pass)
			}
		})
	}
	if _, err := NewExact(json.RawMessage(`{"any_position": true}`)); err == nil {
		t.Error("exact with any_position: want error")
	}
}

func TestChoice(t *testing.T) {
	v, _ := NewChoice(nil)
	five, _ := NewChoice(json.RawMessage(`{"choices": "ABCDE"}`))
	cases := []struct {
		name       string
		v          Verifier
		answer     string
		completion string
		pass       bool
		feedback   string
	}{
		{"tag", v, "B", "<answer>B</answer>", true, ""},
		{"tag parens", v, "B", "<answer>(B)</answer>", true, ""},
		{"tag with text", v, "B", "<answer>B) mitochondria</answer>", true, ""},
		{"tag lower", v, "B", "<answer>b</answer>", true, ""},
		{"boxed", v, "C", `so \boxed{C}`, true, ""},
		{"answer is", v, "D", "Thinking... The answer is (D).", true, ""},
		{"answer colon", v, "A", "Answer: A", true, ""},
		{"bold", v, "A", "**Answer: A**", true, ""},
		{"alone", v, "C", "C", true, ""},
		{"alone dot", v, "C", "C.", true, ""},
		{"wrong", v, "B", "<answer>C</answer>", false, "not correct"},
		{"article is not a letter", v, "A", "the answer is a tricky one", false, "no choice"},
		{"hedged tags", v, "A", "<answer>A</answer><answer>B</answer>", false, "several"},
		{"hedged phrases", v, "A", "The answer is A. No wait, the answer is B.", false, "several"},
		{"not a letter", v, "A", "<answer>Both</answer>", false, "single choice"},
		{"out of range", v, "A", "<answer>E</answer>", false, "not one of"},
		{"five choices", five, "E", "<answer>E</answer>", true, ""},
		{"empty", v, "A", "", false, "empty"},
		{"prose", v, "A", "I am not sure about this question", false, "no choice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustVerify(t, c.v, c.completion, ref(t, map[string]string{"answer": c.answer}))
			if got.Pass != c.pass {
				t.Fatalf("got %+v, want pass=%v", got, c.pass)
			}
			if c.feedback != "" && !strings.Contains(got.Feedback, c.feedback) {
				t.Errorf("feedback %q does not contain %q", got.Feedback, c.feedback)
			}
		})
	}
	if _, err := v.Verify(t.Context(), Sample{Completion: "A", Reference: json.RawMessage(`{"answer": "Z"}`)}); err == nil {
		t.Error("reference letter outside choices: want error")
	}
	if _, err := NewChoice(json.RawMessage(`{"choices": "abc"}`)); err == nil {
		t.Error("lower-case choices: want error")
	}
}
