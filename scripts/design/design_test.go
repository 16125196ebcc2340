package design

import (
	"bytes"
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
