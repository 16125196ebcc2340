package design

import (
	"bytes"
	"image/png"
	"testing"
)

// TestVariedPairs: every pair's chosen side follows the principle its kind checks and the
// rejected side does not (by the rules' part), the kinds cycle, noise swaps labels, and the
// same seed draws the same pairs.
func TestVariedPairs(t *testing.T) {
	for _, c := range []struct {
		noise                  float64
		minFlipped, maxFlipped int
	}{{0, 0, 0}, {0.5, 90, 160}} {
		pairs := VariedPairs(250, 7, c.noise)
		flipped := 0
		for i, p := range pairs {
			good, bad := p.Chosen, p.Rejected
			if p.Flipped {
				flipped++
				good, bad = bad, good
			}
			if p.Principle != VariedKinds[i%len(VariedKinds)] {
				t.Fatalf("pair %d is %s, want %s", i, p.Principle, VariedKinds[i%len(VariedKinds)])
			}
			if g, b := follows(good, p.Principle), follows(bad, p.Principle); g != 1 || b >= 1 {
				t.Fatalf("pair %d (%s): chosen follows %.3f, rejected %.3f; want 1 and less\n%s\n%s", i, p.Principle, g, b, good.JSON(), bad.JSON())
			}
			for _, l := range []Layout{good, bad} {
				for _, x := range l.Boxes {
					if x.X < 0 || x.Y < 0 || x.X+x.W > Canvas || x.Y+x.H > Canvas || x.W <= 0 || x.H <= 0 {
						t.Fatalf("pair %d (%s): box outside the canvas %+v", i, p.Principle, x)
					}
				}
			}
		}
		if flipped < c.minFlipped || flipped > c.maxFlipped {
			t.Fatalf("noise %.1f flipped %d of 250", c.noise, flipped)
		}
	}
	if a, b := VariedPairs(20, 3, 0.1), VariedPairs(20, 3, 0.1); a[19].Rejected.JSON() != b[19].Rejected.JSON() || a[19].Flipped != b[19].Flipped {
		t.Fatal("the same seed draws other pairs")
	}
}

// TestRepair: hand-computed repairs of one layout.
func TestRepair(t *testing.T) {
	l := Layout{Boxes: []Box{
		{ID: "b0", X: 14, Y: 10, W: 60, H: 30},
		{ID: "b1", X: 27, Y: 30, W: 70, H: 30},
		{ID: "b2", X: 4, Y: 55, W: 40, H: 30},
	}}
	for _, c := range []struct {
		principle string
		want      []Box
	}{
		{"alignment", []Box{{ID: "b0", X: 10, Y: 10, W: 60, H: 30}, {ID: "b1", X: 10, Y: 30, W: 70, H: 30}, {ID: "b2", X: 10, Y: 55, W: 40, H: 30}}},
		// (100 − 10 margin − 10 top − 2·4 gaps) / 3 = 24: tops 10, 38, 66.
		{"overlap", []Box{{ID: "b0", X: 14, Y: 10, W: 60, H: 24}, {ID: "b1", X: 27, Y: 38, W: 70, H: 24}, {ID: "b2", X: 4, Y: 66, W: 40, H: 24}}},
		{"balance", l.Boxes},
	} {
		got := Repair(l, c.principle)
		if got.JSON() != (Layout{Boxes: c.want}).JSON() {
			t.Errorf("%s: %s\nwant %s", c.principle, got.JSON(), Layout{Boxes: c.want}.JSON())
		}
	}
	first := Layout{Boxes: []Box{{ID: "b0", X: 4, Y: 10, W: 70, H: 30}, {ID: "b1", X: 36, Y: 50, W: 70, H: 30}}}
	if got := Repair(first, "alignment").Boxes; got[0].X != 10 || got[1].X != 10 {
		t.Errorf("a first edge at 4 repairs to %v, want every edge at 10 (one grid step in)", got)
	}
	if l.Boxes[1].X != 27 {
		t.Error("Repair changed its input")
	}
}

// TestSheet: the sheet's size, a refused completion's pink cell, a drawn box's colour, and the
// same bytes for the same rows.
func TestSheet(t *testing.T) {
	box := `{"boxes":[{"id":"b0","x":0,"y":0,"w":100,"h":100,"color":"navy"}]}`
	rows := [][]string{{box, "not json", box}, {box}}
	a, err := Sheet(rows, 16)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 2+3*18 || b.Dy() != 2+2*18 {
		t.Fatalf("sheet is %v, want 56x38", b)
	}
	for _, c := range []struct {
		x, y    int
		r, g, b uint32
	}{
		{2 + 8, 2 + 8, 0, 0, 128},               // navy
		{2 + 18 + 8, 2 + 8, 255, 200, 210},      // refused: pink
		{2 + 18 + 8, 2 + 18 + 8, 160, 160, 160}, // no completion: the gutter's grey
		{0, 0, 160, 160, 160},
	} {
		r, g, b, _ := img.At(c.x, c.y).RGBA()
		if r>>8 != c.r || g>>8 != c.g || b>>8 != c.b {
			t.Errorf("pixel (%d,%d) = %d,%d,%d, want %d,%d,%d", c.x, c.y, r>>8, g>>8, b>>8, c.r, c.g, c.b)
		}
	}
	if b, _ := Sheet(rows, 16); !bytes.Equal(a, b) {
		t.Error("the same rows give other bytes")
	}
	if _, err := Sheet(nil, 16); err == nil {
		t.Error("an empty sheet is not refused")
	}
}
