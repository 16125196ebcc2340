package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestAesthetic checks the rule-based design score against hand-computed cases.
func TestAesthetic(t *testing.T) {
	box := func(id string, x, y, w, h float64) string {
		b, _ := json.Marshal(map[string]any{"id": id, "x": x, "y": y, "w": w, "h": h})
		return string(b)
	}
	layout := func(boxes ...string) string { return `{"boxes":[` + strings.Join(boxes, ",") + `]}` }
	for _, c := range []struct {
		name, completion, params string
		score, align, overlap    float64
	}{
		// A column on the grid, no overlap: both principles hold.
		{"column", layout(box("a", 10, 10, 50, 20), box("b", 10, 34, 40, 20), box("c", 10, 58, 60, 20)), ``, 1, 1, 1},
		// Two of three share a left edge on the grid (10, 10.8); the third is at 23.
		{"ragged", layout(box("a", 10, 10, 50, 20), box("b", 10.8, 34, 40, 20), box("c", 23, 58, 60, 20)), ``, 0.5*2.0/3 + 0.5, 2.0 / 3, 1},
		// Shared edges off the grid do not count: 13 is 3 from 10.
		{"off grid", layout(box("a", 13, 10, 50, 20), box("b", 13, 34, 40, 20)), ``, 0.5, 0, 1},
		// ... unless the grid is 13.
		{"grid 13", layout(box("a", 13, 10, 50, 20), box("b", 13, 34, 40, 20)), `{"grid":13}`, 1, 1, 1},
		// b overlaps a by 40×10 = 400 of a total area 2·(40·20) = 1600.
		{"overlap", layout(box("a", 10, 10, 40, 20), box("b", 10, 20, 40, 20)), ``, 0.5 + 0.5*0.75, 1, 0.75},
		// A box without geometry is never aligned and covers nothing.
		{"invalid box", layout(box("a", 10, 10, 40, 20), `{"id":"b","x":10,"y":40,"w":0,"h":5}`), ``, 0.5*0.5 + 0.5, 0.5, 1},
		{"no boxes", `{"boxes":[]}`, ``, 0, 0, 0},
		{"not JSON", `a poster`, ``, 0, -1, -1},
		{"tagged", "<l>" + layout(box("a", 20, 10, 40, 20)) + "</l>", `{"tag":"l"}`, 1, 1, 1},
	} {
		v, err := NewAesthetic(json.RawMessage(c.params))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := v.Verify(context.Background(), Sample{Completion: c.completion})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if math.Abs(got.Score-c.score) > 1e-12 || got.Pass != (c.score == 1) {
			t.Errorf("%s: score %v pass %v, want %v", c.name, got.Score, got.Pass, c.score)
		}
		if c.align >= 0 && (math.Abs(got.Partial["alignment"]-c.align) > 1e-12 || math.Abs(got.Partial["overlap"]-c.overlap) > 1e-12) {
			t.Errorf("%s: partial %v, want alignment %v overlap %v", c.name, got.Partial, c.align, c.overlap)
		}
		if c.align < 0 && got.Feedback == "" {
			t.Errorf("%s: no feedback for an unreadable layout", c.name)
		}
	}
	for _, bad := range []string{`{"grid":-1}`, `{"tag":"a b"}`, `{"canvas":{"w":1,"h":1}}`} {
		if _, err := NewAesthetic(json.RawMessage(bad)); err == nil {
			t.Errorf("params %s accepted", bad)
		}
	}
}

// TestAestheticDrawable: with a drawable check (the reward workers give the renderer's), a layout
// the check refuses scores 0 with the check's feedback, however good its geometry, and
// Partial["drawn"] counts it; a drawable layout keeps its rule score. Without a check there is no
// "drawn" sub-score.
func TestAestheticDrawable(t *testing.T) {
	const column = `{"boxes":[{"id":"a","x":10,"y":10,"w":50,"h":20,"color":"%s"},{"id":"b","x":10,"y":34,"w":40,"h":20,"color":"%s"}]}`
	drawable := func(completion, tag string) error {
		if strings.Contains(completion, "chartreuse") {
			return errors.New(`box 0 (id "a"): color: "chartreuse": want a known colour`)
		}
		return nil
	}
	for _, c := range []struct {
		name, completion string
		check            func(string, string) error
		score, drawn     float64 // drawn -1: no "drawn" sub-score
		feedback         string
	}{
		{"drawable", fmt.Sprintf(column, "red", "blue"), drawable, 1, 1, ""},
		{"refused by the renderer", fmt.Sprintf(column, "chartreuse", "blue"), drawable, 0, 0, `color: "chartreuse"`},
		{"unreadable", "a poster", drawable, 0, 0, "JSON"},
		{"geometry only", fmt.Sprintf(column, "chartreuse", "blue"), nil, 1, -1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := AestheticFactory(c.check)(nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(context.Background(), Sample{Completion: c.completion})
			if err != nil {
				t.Fatal(err)
			}
			d, has := got.Partial[AestheticDrawn]
			if got.Score != c.score || got.Pass != (c.score == 1) || has != (c.drawn >= 0) || (has && d != c.drawn) {
				t.Errorf("score %v pass %v partial %v, want score %v drawn %v", got.Score, got.Pass, got.Partial, c.score, c.drawn)
			}
			if !strings.Contains(got.Feedback, c.feedback) {
				t.Errorf("feedback %q, want %q in it", got.Feedback, c.feedback)
			}
		})
	}
	if _, err := AestheticFactory(drawable)(json.RawMessage(`{"grid":-1}`)); err == nil {
		t.Error("bad params accepted with a drawable check")
	}
}
