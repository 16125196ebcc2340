package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// LayoutParams configures "layout". The completion holds JSON boxes, either
// {"boxes": [{"id": "title", "x": 0, "y": 0, "w": 100, "h": 20}, ...]} or the bare array;
// coordinates grow right (x) and down (y).
//
// The constraints, each counted once, are: every required box is present; every required box
// is inside the canvas (and at least Margin from its edges, when Margin > 0, as a separate
// constraint); every pair of required boxes does not overlap (unless AllowOverlap) and is at
// least Gap apart (when Gap > 0); each alignment rule holds; each consecutive pair in Order is
// in reading order; and, when IDs is given, no other box is present. The score is the fraction
// satisfied; a missing box fails every constraint it takes part in, so leaving boxes out never
// helps.
type LayoutParams struct {
	Canvas Size `json:"canvas"`
	// IDs lists the boxes that must be present. Boxes named in Align or Order are required too.
	IDs          []string    `json:"ids,omitempty"`
	Margin       float64     `json:"margin,omitempty"`
	Gap          float64     `json:"gap,omitempty"`
	AllowOverlap bool        `json:"allow_overlap,omitempty"`
	Align        []AlignRule `json:"align,omitempty"`
	// Order is the reading order: each box must be above the next (its top at least Tolerance
	// higher), or on the same row (tops within Tolerance) and to its left.
	Order []string `json:"order,omitempty"`
	// Tolerance for alignment and rows, default 1e-6.
	Tolerance float64 `json:"tolerance,omitempty"`
	// Tag: read the JSON from inside <tag>…</tag>.
	Tag string `json:"tag,omitempty"`
}

// Size is a canvas size.
type Size struct {
	W float64 `json:"w"`
	H float64 `json:"h"`
}

// AlignRule says that the given edge of every listed box is equal within the tolerance. Edges:
// left, right, center (horizontal centre; "centre" is accepted), top, bottom, middle (vertical
// centre).
type AlignRule struct {
	Edge string   `json:"edge"`
	IDs  []string `json:"ids"`
}

// Box is one rectangle of a layout.
type Box struct {
	ID string   `json:"id"`
	X  *float64 `json:"x"`
	Y  *float64 `json:"y"`
	W  *float64 `json:"w"`
	H  *float64 `json:"h"`
}

const maxBoxes = 256

var alignEdges = []string{"left", "right", "center", "centre", "top", "bottom", "middle"}

type layoutVerifier struct{ p LayoutParams }

// NewLayout builds "layout".
func NewLayout(params json.RawMessage) (Verifier, error) {
	l := &layoutVerifier{}
	if err := DecodeParams("layout", params, &l.p); err != nil {
		return nil, err
	}
	if err := l.p.validate(false); err != nil {
		return nil, err
	}
	return l, nil
}

func (p *LayoutParams) validate(complete bool) error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("verify: layout params: %s=%v: %s", field, v, want)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if p.Tolerance == 0 {
		p.Tolerance = 1e-6
	}
	switch {
	case !finite(p.Margin) || p.Margin < 0:
		return bad("margin", p.Margin, "want a finite value >= 0")
	case !finite(p.Gap) || p.Gap < 0:
		return bad("gap", p.Gap, "want a finite value >= 0")
	case !finite(p.Tolerance) || p.Tolerance < 0:
		return bad("tolerance", p.Tolerance, "want a finite value >= 0")
	case p.Tag != "" && !validTagName(p.Tag):
		return bad("tag", p.Tag, "want letters, digits, '_' or '-'")
	}
	for i, a := range p.Align {
		if !contains(alignEdges, a.Edge) {
			return bad(fmt.Sprintf("align[%d].edge", i), a.Edge, "allowed values: "+strings.Join(alignEdges, ", "))
		}
		if len(a.IDs) < 2 {
			return bad(fmt.Sprintf("align[%d].ids", i), a.IDs, "want at least 2 ids")
		}
	}
	if !complete {
		return nil
	}
	if !finite(p.Canvas.W) || !finite(p.Canvas.H) || p.Canvas.W <= 0 || p.Canvas.H <= 0 {
		return bad("canvas", fmt.Sprintf("{w:%g h:%g}", p.Canvas.W, p.Canvas.H), "want w > 0 and h > 0")
	}
	if len(p.required()) == 0 {
		return fmt.Errorf("verify: layout: no boxes required (set ids, align or order)")
	}
	if len(p.required()) > maxBoxes {
		return bad("ids", len(p.required()), fmt.Sprintf("at most %d boxes", maxBoxes))
	}
	return nil
}

// required lists the required ids in first-mention order.
func (p *LayoutParams) required() []string {
	seen := map[string]bool{}
	var out []string
	add := func(ids []string) {
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	add(p.IDs)
	for _, a := range p.Align {
		add(a.IDs)
	}
	add(p.Order)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type rect struct{ x, y, w, h float64 }

func (r rect) valid() bool {
	for _, v := range []float64{r.x, r.y, r.w, r.h} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return r.w > 0 && r.h > 0 && !math.IsInf(r.x+r.w, 0) && !math.IsInf(r.y+r.h, 0)
}

func (r rect) edge(e string) float64 {
	switch e {
	case "left":
		return r.x
	case "right":
		return r.x + r.w
	case "center", "centre":
		return r.x + r.w/2
	case "top":
		return r.y
	case "bottom":
		return r.y + r.h
	default: // middle
		return r.y + r.h/2
	}
}

func parseBoxes(text string) ([]Box, error) { return decodeBoxes[Box](text) }

// decodeBoxes reads the boxes of either layout form into T (Box, or json.RawMessage for readers
// of the attributes the verifier ignores).
func decodeBoxes[T any](text string) ([]T, error) {
	trim := bytes.TrimSpace([]byte(text))
	var boxes []T
	if len(trim) > 0 && trim[0] == '[' {
		if err := json.Unmarshal(trim, &boxes); err != nil {
			return nil, err
		}
		return boxes, nil
	}
	var wrapped struct {
		Boxes []T `json:"boxes"`
	}
	if err := json.Unmarshal(trim, &wrapped); err != nil {
		return nil, err
	}
	if wrapped.Boxes == nil {
		return nil, fmt.Errorf(`no "boxes" array`)
	}
	return wrapped.Boxes, nil
}

func (l *layoutVerifier) Verify(ctx context.Context, s Sample) (Verdict, error) {
	p := l.p
	if err := ApplyReference("layout", &p, s.Reference); err != nil {
		return Verdict{}, err
	}
	if err := p.validate(true); err != nil {
		return Verdict{}, err
	}
	boxes, _, err := ParseLayout(s.Completion, p.Tag)
	if err != nil {
		return fail("%s", err.Error()), nil
	}
	byID := map[string]rect{}
	invalid := map[string]bool{}
	for _, b := range boxes {
		if _, dup := byID[b.ID]; dup || invalid[b.ID] {
			return fail("box id %s appears more than once", quote(b.ID)), nil
		}
		if b.X == nil || b.Y == nil || b.W == nil || b.H == nil {
			invalid[b.ID] = true
			continue
		}
		r := rect{*b.X, *b.Y, *b.W, *b.H}
		if !r.valid() {
			invalid[b.ID] = true
			continue
		}
		byID[b.ID] = r
	}
	req := p.required()
	ok, total := 0, 0
	var failures []string
	check := func(good bool, format string, args ...any) {
		total++
		if good {
			ok++
		} else {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	tol := p.Tolerance
	for _, id := range req {
		_, present := byID[id]
		switch {
		case invalid[id]:
			check(false, "box %s needs x, y and w, h > 0", id)
		default:
			check(present, "box %s is missing", id)
		}
	}
	for _, id := range req {
		r, present := byID[id]
		check(present && r.x >= -tol && r.y >= -tol && r.x+r.w <= p.Canvas.W+tol && r.y+r.h <= p.Canvas.H+tol,
			"box %s is not inside the %gx%g canvas", id, p.Canvas.W, p.Canvas.H)
		if p.Margin > 0 {
			m := p.Margin - tol
			check(present && r.x >= m && r.y >= m && p.Canvas.W-(r.x+r.w) >= m && p.Canvas.H-(r.y+r.h) >= m,
				"box %s is closer than %g to the canvas edge", id, p.Margin)
		}
	}
	for i := 0; i < len(req); i++ {
		for j := i + 1; j < len(req); j++ {
			a, okA := byID[req[i]]
			b, okB := byID[req[j]]
			both := okA && okB
			dx := math.Max(b.x-(a.x+a.w), a.x-(b.x+b.w)) // > 0: separated horizontally
			dy := math.Max(b.y-(a.y+a.h), a.y-(b.y+b.h))
			if !p.AllowOverlap {
				check(both && (dx >= -tol || dy >= -tol), "boxes %s and %s overlap", req[i], req[j])
			}
			if p.Gap > 0 {
				check(both && math.Max(dx, dy) >= p.Gap-tol, "boxes %s and %s are closer than %g", req[i], req[j], p.Gap)
			}
		}
	}
	for _, a := range p.Align {
		lo, hi := math.Inf(1), math.Inf(-1)
		all := true
		for _, id := range a.IDs {
			r, present := byID[id]
			if !present {
				all = false
				break
			}
			e := r.edge(a.Edge)
			lo, hi = math.Min(lo, e), math.Max(hi, e)
		}
		check(all && hi-lo <= tol, "%s edges of %s are not aligned", a.Edge, strings.Join(a.IDs, ", "))
	}
	for i := 0; i+1 < len(p.Order); i++ {
		a, okA := byID[p.Order[i]]
		b, okB := byID[p.Order[i+1]]
		inOrder := okA && okB && (a.y < b.y-tol || (math.Abs(a.y-b.y) <= tol && a.x < b.x))
		check(inOrder, "%s does not come before %s in reading order (top-to-bottom, then left-to-right)", p.Order[i], p.Order[i+1])
	}
	if len(p.IDs) > 0 {
		var extra []string
		for _, b := range boxes {
			if !contains(req, b.ID) {
				extra = append(extra, b.ID)
			}
		}
		check(len(extra) == 0, "unexpected boxes: %s", clip(strings.Join(extra, ", "), 80))
	}
	return fraction(ok, total, failures, nil), nil
}
