package design

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestPairs: every rejected layout scores lower by the rules than its chosen twin, each principle
// is broken in turn, noise swaps labels, and the renders are deterministic.
func TestPairs(t *testing.T) {
	for _, c := range []struct {
		noise      float64
		minFlipped int
		maxFlipped int
	}{{0, 0, 0}, {0.5, 60, 140}} {
		pairs := Pairs(200, 7, c.noise)
		flipped := 0
		for i, p := range pairs {
			good, bad := p.Chosen, p.Rejected
			if p.Flipped {
				flipped++
				good, bad = bad, good
			}
			if Score(good) != 1 || Score(bad) >= Score(good) {
				t.Fatalf("pair %d (%s): score %.3f vs %.3f, want 1 > rejected", i, p.Principle, Score(good), Score(bad))
			}
			if p.Principle != Principles[i%len(Principles)] {
				t.Fatalf("pair %d breaks %s", i, p.Principle)
			}
		}
		if flipped < c.minFlipped || flipped > c.maxFlipped {
			t.Fatalf("noise %.1f flipped %d of 200", c.noise, flipped)
		}
	}
	a, err := Render(Pairs(1, 3, 0)[0].Rejected, 32)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Render(Pairs(1, 3, 0)[0].Rejected, 32)
	if !bytes.Equal(a, b) {
		t.Fatal("renders of the same layout differ")
	}
	if _, err := Break(Good(rand.New(rand.NewPCG(1, 2))), "balance", nil); err == nil {
		t.Fatal("an unknown principle is not refused")
	}
	if err := WritePairs(filepath.Join(t.TempDir(), "p.jsonl"), Pairs(3, 1, 0), 32, false); err != nil {
		t.Fatal(err)
	}
}

// TestPlain: the SFT start's layouts are valid, inside the canvas, with the brief's boxes, and
// mediocre by the rules (room to rise).
func TestPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var sum float64
	briefs := Briefs(400, 1)
	for _, b := range briefs {
		l := Plain(b, rng)
		if len(l.Boxes) != len(b.Colours) || len(l.Boxes) < 3 || len(l.Boxes) > 4 {
			t.Fatalf("%s: %d boxes for %q", b.ID, len(l.Boxes), b.Prompt())
		}
		for i, x := range l.Boxes {
			if x.ID != fmt.Sprintf("b%d", i) || x.Color != b.Colours[i] || x.X < 0 || x.Y < 0 || x.X+x.W > Canvas || x.Y+x.H > Canvas || x.W <= 0 || x.H <= 0 {
				t.Fatalf("%s: box %d %+v", b.ID, i, x)
			}
		}
		sum += Score(l)
	}
	mean := sum / float64(len(briefs))
	t.Logf("plain layouts: mean rule score %.3f", mean)
	if mean < 0.4 || mean > 0.7 {
		t.Fatalf("mean rule score of plain layouts %.3f, want 0.4..0.7", mean)
	}
}
