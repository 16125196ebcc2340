package design

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/temperml/temper/algorithms/layoutrender"
	"github.com/temperml/temper/algorithms/verify"
)

// Canvas is the layouts' coordinate space (square).
const Canvas = 100

// GridStep is the alignment grid.
const GridStep = 10

// Principles are the design principles a rejected layout may break.
var Principles = []string{"alignment", "overlap"}

// Box is one layout box, in the layout verifier's and the renderer's fields.
type Box struct {
	ID    string  `json:"id"`
	Role  string  `json:"role,omitempty"`
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	W     float64 `json:"w"`
	H     float64 `json:"h"`
	Color string  `json:"color"`
}

// Layout is a layout completion's JSON value.
type Layout struct {
	Boxes []Box `json:"boxes"`
}

// JSON is the completion text of l.
func (l Layout) JSON() string {
	b, _ := json.Marshal(l)
	return string(b)
}

var colours = []string{"navy", "teal", "orange", "purple", "red", "green", "brown"}

// Good draws a layout that follows every principle.
func Good(rng *rand.Rand) Layout {
	n := 3 + rng.IntN(3)
	x := float64(GridStep * (1 + rng.IntN(2)))
	gap := 4.0
	avail := Canvas - 2*GridStep - gap*float64(n-1)
	h := math.Floor(avail / float64(n))
	y := float64(GridStep)
	perm := rng.Perm(len(colours))
	var l Layout
	for i := range n {
		w := float64(GridStep * (4 + rng.IntN(4))) // 40–70
		w = math.Min(w, Canvas-GridStep-x)
		bh := h - float64(rng.IntN(3))*2
		l.Boxes = append(l.Boxes, Box{ID: fmt.Sprintf("b%d", i), Role: "shape", X: x, Y: y, W: w, H: bh, Color: colours[perm[i]]})
		y += bh + gap
	}
	return l
}

// Break returns a copy of good that breaks principle (one of Principles).
func Break(good Layout, principle string, rng *rand.Rand) (Layout, error) {
	bad := Layout{Boxes: append([]Box(nil), good.Boxes...)}
	switch principle {
	case "alignment":
		for i := range bad.Boxes {
			b := &bad.Boxes[i]
			shift := float64(10 + rng.IntN(9))
			if rng.IntN(2) == 0 && b.X-shift >= 0 {
				shift = -shift
			}
			b.X = math.Max(0, math.Min(b.X+shift, Canvas-b.W))
		}
	case "overlap":
		if len(bad.Boxes) < 2 {
			return Layout{}, fmt.Errorf("design: break overlap: %d boxes, want at least 2", len(bad.Boxes))
		}
		i := 1 + rng.IntN(len(bad.Boxes)-1)
		prev := bad.Boxes[i-1]
		frac := 0.4 + 0.3*rng.Float64()
		bad.Boxes[i].Y = prev.Y + prev.H - frac*prev.H
	default:
		return Layout{}, fmt.Errorf("design: principle %q: allowed %q", principle, Principles)
	}
	return bad, nil
}

// Score is the rule-based aesthetic score in [0, 1] of the principles (verify.AestheticScore,
// the "aesthetic" verifier): the mean of alignment (the largest share of boxes whose left edges
// are within 1 unit of each other and on the grid) and non-overlap (1 − the overlapping area over
// the boxes' total area, at least 0).
func Score(l Layout) float64 {
	s, _ := ScoreParts(l)
	return s
}

// ScoreParts is Score with its parts by principle ("alignment", "overlap").
func ScoreParts(l Layout) (float64, map[string]float64) {
	boxes := make([]verify.Box, len(l.Boxes))
	for i := range l.Boxes {
		b := &l.Boxes[i]
		boxes[i] = verify.Box{ID: b.ID, X: &b.X, Y: &b.Y, W: &b.W, H: &b.H}
	}
	return verify.AestheticScore(boxes, GridStep)
}

// Pair is one preference pair: Chosen scores higher by the rules unless Flipped (label noise).
type Pair struct {
	ID               string
	Principle        string // the principle the rejected (or, flipped, the chosen) layout breaks
	Chosen, Rejected Layout
	Flipped          bool
}

// Pairs draws n pairs from seed, cycling through the principles, with chosen and rejected swapped
// with probability noise.
func Pairs(n int, seed uint64, noise float64) []Pair {
	rng := rand.New(rand.NewPCG(seed, 0xde5167))
	out := make([]Pair, n)
	for i := range out {
		good := Good(rng)
		p := Principles[i%len(Principles)]
		bad, _ := Break(good, p, rng) // Good draws at least 3 boxes; p is one of Principles
		out[i] = Pair{ID: fmt.Sprintf("d%05d", i), Principle: p, Chosen: good, Rejected: bad}
		if noise > 0 && rng.Float64() < noise {
			out[i].Chosen, out[i].Rejected, out[i].Flipped = bad, good, true
		}
	}
	return out
}

// Render draws l at size×size pixels as PNG bytes.
func Render(l Layout, size int) ([]byte, error) {
	png, _, err := layoutrender.RenderPNG(l.JSON(), layoutrender.Options{Canvas: verify.Size{W: Canvas, H: Canvas}, Width: size, Height: size})
	if err != nil {
		return nil, fmt.Errorf("design: render: %w", err)
	}
	return png, nil
}

// WritePairs renders pairs at size×size and writes a JSONL file of image pairs at path: with
// inline true each image is a data: URI, else a PNG file in dir/images/ referenced by file:// URI.
func WritePairs(path string, pairs []Pair, size int, inline bool) error {
	dir := filepath.Join(filepath.Dir(path), "images")
	if !inline {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	ref := func(l Layout, name string) (string, error) {
		png, err := Render(l, size)
		if err != nil {
			return "", err
		}
		if inline {
			return "data:image/png;base64," + base64.StdEncoding.EncodeToString(png), nil
		}
		p, err := filepath.Abs(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			return "", err
		}
		return "file://" + filepath.ToSlash(p), nil
	}
	type part struct {
		Type  string `json:"type"`
		Image string `json:"image"`
	}
	for _, p := range pairs {
		c, err := ref(p.Chosen, p.ID+"-c.png")
		if err != nil {
			f.Close()
			return err
		}
		r, err := ref(p.Rejected, p.ID+"-r.png")
		if err != nil {
			f.Close()
			return err
		}
		line := map[string]any{"id": p.ID, "chosen": []part{{"image", c}}, "rejected": []part{{"image", r}}}
		if err := enc.Encode(line); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
