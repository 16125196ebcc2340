package verify

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	// Canvas 100x100, margin 5, gap 2; title over two columns; left edges of title and a aligned;
	// tops of a and b aligned; reading order title, a, b.
	params := `{"canvas": {"w": 100, "h": 100}, "ids": ["title", "a", "b"], "margin": 5, "gap": 2,
		"align": [{"edge": "left", "ids": ["title", "a"]}, {"edge": "top", "ids": ["a", "b"]}],
		"order": ["title", "a", "b"]}`
	v, err := NewLayout(json.RawMessage(params))
	if err != nil {
		t.Fatal(err)
	}
	// Constraints: 3 present + 3 inside + 3 margin + 3 overlap + 3 gap + 2 align + 2 order + 1 extras = 20.
	const total = 20.0
	good := `{"boxes": [{"id": "title", "x": 5, "y": 5, "w": 90, "h": 10},
		{"id": "a", "x": 5, "y": 20, "w": 40, "h": 70}, {"id": "b", "x": 50, "y": 20, "w": 45, "h": 70}]}`
	cases := []struct {
		name       string
		completion string
		score      float64
		feedback   []string
	}{
		{"all good", good, 1, nil},
		{"bare array in fence", "```json\n[{\"id\": \"title\", \"x\": 5, \"y\": 5, \"w\": 90, \"h\": 10}, {\"id\": \"a\", \"x\": 5, \"y\": 20, \"w\": 40, \"h\": 70}, {\"id\": \"b\", \"x\": 50, \"y\": 20, \"w\": 45, \"h\": 70}]\n```", 1, nil},
		// b pushed right by 10: outside the canvas and inside the margin: 2 violations.
		{"out of bounds", strings.Replace(good, `"x": 50, "y": 20, "w": 45`, `"x": 60, "y": 20, "w": 45`, 1), (total - 2) / total,
			[]string{"box b is not inside", "box b is closer than 5 to the canvas edge"}},
		// b overlaps a (x 40 < 45): overlap and gap violated.
		{"overlap", strings.Replace(good, `"x": 50, "y": 20`, `"x": 40, "y": 20`, 1), (total - 2) / total,
			[]string{"boxes a and b overlap", "boxes a and b are closer than 2"}},
		// b 1 unit from a: gap violated only.
		{"gap", strings.Replace(good, `"x": 50, "y": 20`, `"x": 46, "y": 20`, 1), (total - 1) / total,
			[]string{"boxes a and b are closer than 2"}},
		// b's top moved down by 1: top alignment broken; still below title; reading order a→b
		// still holds (a is higher).
		{"misaligned", strings.Replace(good, `"x": 50, "y": 20, "w": 45, "h": 70`, `"x": 50, "y": 21, "w": 45, "h": 69`, 1), (total - 1) / total,
			[]string{"top edges of a, b are not aligned"}},
		// a and b swapped horizontally: order a→b violated, and title/a left edges misaligned.
		{"reading order", `{"boxes": [{"id": "title", "x": 5, "y": 5, "w": 90, "h": 10},
			{"id": "b", "x": 5, "y": 20, "w": 40, "h": 70}, {"id": "a", "x": 50, "y": 20, "w": 45, "h": 70}]}`, (total - 2) / total,
			[]string{"a does not come before b", "left edges of title, a are not aligned"}},
		// b missing: present, inside, margin, 2 overlaps, 2 gaps, top align, order a→b = 9 failures.
		{"missing box", `{"boxes": [{"id": "title", "x": 5, "y": 5, "w": 90, "h": 10}, {"id": "a", "x": 5, "y": 20, "w": 40, "h": 70}]}`, (total - 9) / total,
			[]string{"box b is missing"}},
		{"extra box", strings.Replace(good, `]}`, `, {"id": "ad", "x": 60, "y": 92, "w": 1, "h": 1}]}`, 1), (total - 1) / total,
			[]string{"unexpected boxes: ad"}},
		{"negative size", strings.Replace(good, `"w": 45`, `"w": -45`, 1), (total - 9) / total, []string{"box b needs x, y and w, h > 0"}},
		{"missing field", strings.Replace(good, `"w": 45, `, ``, 1), (total - 9) / total, []string{"box b needs"}},
		{"huge numbers", strings.Replace(good, `"w": 45`, `"w": 1e308`, 1), -1, nil},
		{"duplicate id", strings.Replace(good, `"id": "b"`, `"id": "a"`, 1), 0, []string{"more than once"}},
		{"not json", "the layout is nice", 0, []string{"not valid JSON"}},
		{"empty", "", 0, []string{"empty output"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustVerify(t, v, c.completion, nil)
			if c.score >= 0 && math.Abs(got.Score-c.score) > 1e-12 {
				t.Fatalf("score = %v, want %v (feedback %q)", got.Score, c.score, got.Feedback)
			}
			if got.Pass != (c.score == 1) {
				t.Errorf("pass = %v", got.Pass)
			}
			for _, f := range c.feedback {
				if !strings.Contains(got.Feedback, f) {
					t.Errorf("feedback %q does not contain %q", got.Feedback, f)
				}
			}
		})
	}
	// Same row within tolerance, left before right.
	row, _ := NewLayout(json.RawMessage(`{"canvas": {"w": 10, "h": 10}, "order": ["l", "r"], "tolerance": 0.5}`))
	got := mustVerify(t, row, `[{"id": "l", "x": 0, "y": 0.3, "w": 4, "h": 4}, {"id": "r", "x": 5, "y": 0, "w": 4, "h": 4}]`, nil)
	if !got.Pass {
		t.Errorf("same-row order: %+v", got)
	}
	for _, p := range []string{`{"align": [{"edge": "diagonal", "ids": ["a", "b"]}]}`, `{"gap": -1}`, `{"align": [{"edge": "left", "ids": ["a"]}]}`} {
		_, err := NewLayout(json.RawMessage(p))
		if err == nil {
			t.Errorf("params %s: want error", p)
		} else {
			t.Logf("%s: %v", p, err)
		}
	}
	noCanvas, _ := NewLayout(json.RawMessage(`{"ids": ["a"]}`))
	if _, err := noCanvas.Verify(t.Context(), Sample{Completion: "[]"}); err == nil {
		t.Error("no canvas: want error")
	}
	noIDs, _ := NewLayout(json.RawMessage(`{"canvas": {"w": 1, "h": 1}}`))
	if _, err := noIDs.Verify(t.Context(), Sample{Completion: "[]"}); err == nil {
		t.Error("no required boxes: want error")
	}
}
