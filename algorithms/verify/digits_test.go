package verify

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestDigits(t *testing.T) {
	v, err := NewDigits(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		answer, completion string
		score              float64
		pass               bool
	}{
		{"62", "62", 1, true},
		{"62", "62\nwhatever follows", 1, true},
		{"62", " 062 ", 1, true}, // leading zeros and spaces are not digits of the number
		{"62", "69", 0.5, false},
		{"62", "52", 0.5, false},
		{"62", "26", 0, false},
		{"62", "620", 0, false}, // shifted: no aligned digit agrees
		{"62", "162", 2.0 / 3, false},
		{"162", "62", 2.0 / 3, false}, // a dropped leading digit
		{"-12", "12", 2.0 / 3, false}, // the sign is one more position
		{"-12", "-12", 1, true},
		{"0", "-0", 1, true},
		{"62", "", 0, false},
		{"62", "sixty-two", 0, false},
		{"62", "6 2", 0, false},
		{"62", strings.Repeat("9", 65), 0, false},                   // > 64 digits
		{"62", "99999999999999999999999999999992", 1.0 / 32, false}, // huge numbers earn almost nothing
	} {
		ref, _ := json.Marshal(map[string]string{"answer": c.answer, "task": "add2"})
		got, err := v.Verify(context.Background(), Sample{Completion: c.completion, Reference: ref})
		if err != nil {
			t.Fatalf("%q vs %q: %v", c.completion, c.answer, err)
		}
		if math.Abs(got.Score-c.score) > 1e-12 || got.Pass != c.pass {
			t.Errorf("%q vs %q: score %v pass %v, want %v %v (%q)", c.completion, c.answer, got.Score, got.Pass, c.score, c.pass, got.Feedback)
		}
		if !got.Pass && got.Feedback == "" {
			t.Errorf("%q vs %q: a failure needs feedback", c.completion, c.answer)
		}
	}
	if _, err := v.Verify(context.Background(), Sample{Completion: "1", Reference: json.RawMessage(`{"answer":"x"}`)}); err == nil {
		t.Error("a non-integer reference must be an error")
	}
	if _, err := NewDigits(json.RawMessage(`{"answr":"1"}`)); err == nil {
		t.Error("unknown params must be rejected")
	}
}
