package verify

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestCountdown(t *testing.T) {
	v, _ := NewCountdown(nil)
	all, _ := NewCountdown(json.RawMessage(`{"use_all": true}`))
	r := json.RawMessage(`{"numbers": [3, 8, 4, 25], "target": 24}`)
	cases := []struct {
		name       string
		v          Verifier
		reference  json.RawMessage
		completion string
		pass       bool
		feedback   string
	}{
		{"simple", v, r, "<answer>3*8</answer>", true, ""},
		{"parens", v, r, "<answer>(25 - 4 + 3) * 8 / 8</answer>", false, "not available"}, // 8 used twice
		{"all four", all, r, "<answer>(25 - 3 + 4) - 8 + 6</answer>", false, "not available"},
		{"use all ok", all, json.RawMessage(`{"numbers": [1, 2, 3, 4], "target": 24}`), "<answer>1*2*3*4</answer>", true, ""},
		{"use all missing", all, json.RawMessage(`{"numbers": [1, 2, 3, 4], "target": 24}`), "<answer>2*3*4</answer>", false, "exactly once"},
		{"exact rationals", v, json.RawMessage(`{"numbers": [8, 3, 8, 3], "target": 24}`), "<answer>8/(3-8/3)</answer>", true, ""},
		{"no integer division", v, json.RawMessage(`{"numbers": [7, 2], "target": 3}`), "<answer>7/2</answer>", false, "not the target"},
		{"last line", v, r, "I try 3*8.\n3 * 8 = 24", true, ""},
		{"unicode ops", v, r, "<answer>3 × 8</answer>", true, ""},
		{"wrong value", v, r, "<answer>25-4</answer>", false, "not the target"},
		{"reused number", v, r, "<answer>4*4+8</answer>", false, "not available"},
		{"concatenation", v, r, "<answer>24</answer>", false, "not available"},
		{"unary minus", v, json.RawMessage(`{"numbers": [3, 27], "target": 24}`), "<answer>-3+27</answer>", false, "cannot evaluate"},
		{"decimal", v, r, "<answer>3*8.0</answer>", false, "may only use"},
		{"letters", v, r, "<answer>eval('24')</answer>", false, "may only use"},
		{"div zero", v, json.RawMessage(`{"numbers": [3, 3, 1], "target": 1}`), "<answer>1/(3-3)</answer>", false, "division by zero"},
		{"hedged", v, r, "<answer>3*8</answer><answer>25-4</answer>", false, "different"},
		{"chain", v, r, "3*8=24, 24*1=24", false, "chain"},
		{"empty", v, r, "", false, "no expression"},
		{"deep", v, r, "<answer>" + strings.Repeat("(", 200) + "3" + strings.Repeat(")", 200) + "</answer>", false, "nesting"},
		{"huge literal", v, r, "<answer>" + strings.Repeat("9", 5000) + "</answer>", false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustVerify(t, c.v, c.completion, c.reference)
			if got.Pass != c.pass {
				t.Fatalf("got %+v, want pass=%v", got, c.pass)
			}
			if c.feedback != "" && !strings.Contains(got.Feedback, c.feedback) {
				t.Errorf("feedback %q does not contain %q", got.Feedback, c.feedback)
			}
		})
	}
	if _, err := v.Verify(t.Context(), Sample{Completion: "1", Reference: json.RawMessage(`{"numbers": [1]}`)}); err == nil {
		t.Error("missing target: want error")
	}
}

const (
	sudoku4Givens   = "1.3. .4.2 2.4. .3.1"
	sudoku4Solution = "1234\n3412\n2143\n4321"
	sudoku9Givens   = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
	sudoku9Solution = `5 3 4 | 6 7 8 | 9 1 2
6 7 2 | 1 9 5 | 3 4 8
1 9 8 | 3 4 2 | 5 6 7
------+-------+------
8 5 9 | 7 6 1 | 4 2 3
4 2 6 | 8 5 3 | 7 9 1
7 1 3 | 9 2 4 | 8 5 6
------+-------+------
9 6 1 | 5 3 7 | 2 8 4
2 8 7 | 4 1 9 | 6 3 5
3 4 5 | 2 8 6 | 1 7 9`
)

func TestSudoku(t *testing.T) {
	v, _ := NewSudoku(nil)
	partial, _ := NewSudoku(json.RawMessage(`{"partial": true}`))
	g4 := ref(t, map[string]string{"givens": sudoku4Givens})
	g9 := ref(t, map[string]string{"givens": sudoku9Givens})
	cases := []struct {
		name       string
		v          Verifier
		reference  json.RawMessage
		completion string
		score      float64
		feedback   string
	}{
		{"4x4 lines", v, g4, "Solved:\n" + sudoku4Solution, 1, ""},
		{"4x4 json", v, g4, "<answer>[[1,2,3,4],[3,4,1,2],[2,1,4,3],[4,3,2,1]]</answer>", 1, ""},
		{"4x4 givens as rows", v, json.RawMessage(`{"givens": [[1,0,3,0],[0,4,0,2],[2,0,4,0],[0,3,0,1]]}`), sudoku4Solution, 1, ""},
		{"9x9 pretty", v, g9, "```\n" + sudoku9Solution + "\n```", 1, ""},
		// Swapping two cells of a row keeps rows valid but breaks two columns (and givens here).
		{"4x4 broken given", v, g4, "2134\n3412\n1243\n4321", 0, "must keep the given"},
		// Valid Latin square rows/cols but boxes broken, givens respected? Use givens-free puzzle.
		{"4x4 boxes broken", partial, ref(t, map[string]string{"givens": "................"}), "1234\n2341\n3412\n4123", 8.0 / 12, "box"},
		{"4x4 boxes broken binary", v, ref(t, map[string]string{"givens": "................"}), "1234\n2341\n3412\n4123", 0, "box 1"},
		{"empty cell", v, g4, "1.34\n3412\n2143\n4321", 0, "empty"},
		{"too few rows", v, g4, "1234\n3412", 0, "no 4x4 grid"},
		{"hedged tags", v, g4, "<answer>" + sudoku4Solution + "</answer><answer>x</answer>", 0, "appears 2 times"},
		{"empty", v, g4, "", 0, "no 4x4 grid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustVerify(t, c.v, c.completion, c.reference)
			if math.Abs(got.Score-c.score) > 1e-12 || got.Pass != (c.score == 1) {
				t.Fatalf("got %+v, want score %v", got, c.score)
			}
			if c.feedback != "" && !strings.Contains(got.Feedback, c.feedback) {
				t.Errorf("feedback %q does not contain %q", got.Feedback, c.feedback)
			}
		})
	}
	for _, r := range []string{`{"givens": "123"}`, `{"givens": "1234567890123456789012345"}`, `{}`, `{"givens": [[1,2],[3]]}`} {
		if _, err := v.Verify(t.Context(), Sample{Completion: "1", Reference: json.RawMessage(r)}); err == nil {
			t.Errorf("reference %s: want error", r)
		}
	}
}
