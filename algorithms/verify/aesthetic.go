package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
)

// AestheticParams configures "aesthetic", the rule-based design score of a layout: the design
// principles scripts/design draws its preference pairs from, computed by rule. It is meant as an
// evaluation yardstick (eval.verifiers) beside a learned critic, never as the reward the critic is
// compared against: a policy trained on it would be told the principles the critic had to learn.
type AestheticParams struct {
	// Grid is the alignment grid in canvas units; 0 means 10.
	Grid float64 `json:"grid,omitempty"`
	// Tag: read the JSON from inside <tag>…</tag>.
	Tag string `json:"tag,omitempty"`
}

// DefaultAestheticGrid is AestheticParams.Grid when it is 0.
const DefaultAestheticGrid = 10

// AestheticPrinciples are the principles "aesthetic" scores, in Verdict.Partial's keys.
var AestheticPrinciples = []string{"alignment", "overlap"}

// AestheticDrawn is the sub-score (Verdict.Partial) of an aesthetic verifier given a drawable
// check (AestheticFactory): 1 for a layout that can be drawn, 0 for one that cannot, so that its
// mean counts the layouts a critic would have refused.
const AestheticDrawn = "drawn"

type aesthetic struct {
	p        AestheticParams
	drawable func(completion, tag string) error
}

// NewAesthetic builds "aesthetic" on geometry alone (AestheticFactory(nil)).
func NewAesthetic(params json.RawMessage) (Verifier, error) { return newAesthetic(params, nil) }

// AestheticFactory builds "aesthetic" whose layouts must also be drawable: drawable returns why a
// layout cannot be drawn (layoutrender.Check, which this package cannot import: the renderer reads
// layouts with ParseLayout), and such a layout scores 0 with that feedback, as an unreadable one
// does, instead of a score for geometry nobody will see; Partial[AestheticDrawn] says which. The
// reward workers register it in place of NewAesthetic.
func AestheticFactory(drawable func(completion, tag string) error) Factory {
	return func(params json.RawMessage) (Verifier, error) { return newAesthetic(params, drawable) }
}

func newAesthetic(params json.RawMessage, drawable func(completion, tag string) error) (Verifier, error) {
	a := &aesthetic{drawable: drawable}
	if err := DecodeParams("aesthetic", params, &a.p); err != nil {
		return nil, err
	}
	switch {
	case math.IsNaN(a.p.Grid) || math.IsInf(a.p.Grid, 0) || a.p.Grid < 0:
		return nil, fmt.Errorf("verify: aesthetic params: grid=%g: want a finite value >= 0 (0 means %d)", a.p.Grid, DefaultAestheticGrid)
	case a.p.Tag != "" && !validTagName(a.p.Tag):
		return nil, fmt.Errorf("verify: aesthetic params: tag=%q: want letters, digits, '_' or '-'", a.p.Tag)
	}
	if a.p.Grid == 0 {
		a.p.Grid = DefaultAestheticGrid
	}
	return a, nil
}

// Verify scores the layout by rule; a layout the layout verifier cannot read, or (with a drawable
// check) that cannot be drawn, scores 0 with its feedback. It passes at a perfect score.
func (a *aesthetic) Verify(_ context.Context, s Sample) (Verdict, error) {
	boxes, _, err := ParseLayout(s.Completion, a.p.Tag)
	if err == nil && a.drawable != nil {
		err = a.drawable(s.Completion, a.p.Tag)
	}
	if err != nil {
		v := fail("%s", err.Error())
		if a.drawable != nil {
			v.Partial = map[string]float64{AestheticDrawn: 0}
		}
		return v, nil
	}
	score, parts := AestheticScore(boxes, a.p.Grid)
	if a.drawable != nil {
		parts[AestheticDrawn] = 1
	}
	v := Verdict{Score: score, Pass: score == 1, Partial: parts}
	if !v.Pass {
		v.Feedback = "the layout breaks design principles"
	}
	return v, nil
}

// AestheticScore is the rule-based score in [0, 1] of boxes on a grid: the mean of alignment (the
// largest share of boxes whose left edges are within 1 unit of each other and of the grid) and
// non-overlap (1 − the boxes' pairwise overlapping area over their total area, at least 0). A box
// without finite geometry and w, h > 0 is never aligned and covers nothing; no boxes score 0.
func AestheticScore(boxes []Box, grid float64) (float64, map[string]float64) {
	parts := map[string]float64{"alignment": 0, "overlap": 0}
	var rs []rect
	for _, b := range boxes {
		if b.X == nil || b.Y == nil || b.W == nil || b.H == nil {
			continue
		}
		if r := (rect{*b.X, *b.Y, *b.W, *b.H}); r.valid() {
			rs = append(rs, r)
		}
	}
	if len(boxes) == 0 || len(rs) == 0 {
		return 0, parts
	}
	best := 0
	for _, a := range rs {
		n := 0
		for _, b := range rs {
			if math.Abs(a.x-b.x) <= 1 && math.Abs(b.x-grid*math.Round(b.x/grid)) <= 1 {
				n++
			}
		}
		best = max(best, n)
	}
	parts["alignment"] = float64(best) / float64(len(boxes))
	var inter, area float64
	for i, a := range rs {
		area += a.w * a.h
		for _, b := range rs[i+1:] {
			w := math.Min(a.x+a.w, b.x+b.w) - math.Max(a.x, b.x)
			h := math.Min(a.y+a.h, b.y+b.h) - math.Max(a.y, b.y)
			if w > 0 && h > 0 {
				inter += w * h
			}
		}
	}
	parts["overlap"] = math.Max(0, 1-inter/area)
	return 0.5*parts["alignment"] + 0.5*parts["overlap"], parts
}
