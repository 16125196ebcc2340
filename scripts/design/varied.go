package design

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Pair kinds of VariedPairs, cycled in this order.
var VariedKinds = []string{"alignment", "overlap", "grid", "repair-alignment", "repair-overlap"}

// VariedPairs draws n preference pairs from the same two principles as Pairs, on more varied
// layouts, so that a critic learns the principles where a policy starting from Plain layouts
// actually writes: besides Pairs' two kinds (a Good layout against its twin with jagged left
// edges or an overlap), "grid" pairs a Good layout against its twin moved sideways as a whole by
// 3–7 units (edges still shared, but off the grid: Pairs never shows that the grid matters), and
// "repair-alignment" / "repair-overlap" pair a Plain layout (the SFT start's kind) repaired on
// one principle (Repair) against itself. Labels come from the principles alone (the chosen side
// follows one the rejected breaks), never from Score; noise swaps chosen and rejected with that
// probability. Pairs whose two sides would be the same layout are drawn again.
func VariedPairs(n int, seed uint64, noise float64) []Pair {
	rng := rand.New(rand.NewPCG(seed, 0x7a12ed))
	out := make([]Pair, n)
	for i := range out {
		kind := VariedKinds[i%len(VariedKinds)]
		var p Pair
		for {
			chosen, rejected := variedPair(kind, rng)
			if chosen.JSON() != rejected.JSON() && follows(rejected, kind) < 1 {
				p = Pair{ID: fmt.Sprintf("v%05d", i), Principle: kind, Chosen: chosen, Rejected: rejected}
				break
			}
		}
		if noise > 0 && rng.Float64() < noise {
			p.Chosen, p.Rejected, p.Flipped = p.Rejected, p.Chosen, true
		}
		out[i] = p
	}
	return out
}

// variedPair draws one pair of a VariedKinds kind: chosen follows the principle rejected breaks.
func variedPair(kind string, rng *rand.Rand) (chosen, rejected Layout) {
	switch kind {
	case "alignment", "overlap":
		good := Good(rng)
		bad, _ := Break(good, kind, rng) // Good draws at least 3 boxes
		return good, bad
	case "grid":
		good := Good(rng)
		shift := float64(3 + rng.IntN(5))
		if rng.IntN(2) == 0 && good.Boxes[0].X-shift >= 0 {
			shift = -shift
		}
		bad := Layout{Boxes: append([]Box(nil), good.Boxes...)}
		for i := range bad.Boxes {
			bad.Boxes[i].X += shift
			bad.Boxes[i].W = math.Min(bad.Boxes[i].W, Canvas-bad.Boxes[i].X)
		}
		return good, bad
	default: // repair-alignment, repair-overlap
		plain := Plain(randomBrief(rng), rng)
		principle := "alignment"
		if kind == "repair-overlap" {
			principle = "overlap"
		}
		return Repair(plain, principle), plain
	}
}

// follows is the share of the principle a pair of kind checks that l follows (the rules' part).
func follows(l Layout, kind string) float64 {
	part := "alignment"
	if kind == "overlap" || kind == "repair-overlap" {
		part = "overlap"
	}
	_, parts := ScoreParts(l)
	return parts[part]
}

// Repair returns a copy of l that follows principle: "alignment" puts every left edge on the
// grid line nearest the first box's (at least one grid step in), "overlap" stacks the boxes top
// to bottom from the first box's top with a 4-unit gap, sharing the height left so the column
// ends by the bottom margin. Other principles return l unchanged.
func Repair(l Layout, principle string) Layout {
	out := Layout{Boxes: append([]Box(nil), l.Boxes...)}
	if len(out.Boxes) == 0 {
		return out
	}
	switch principle {
	case "alignment":
		x := math.Max(GridStep, GridStep*math.Round(out.Boxes[0].X/GridStep))
		for i := range out.Boxes {
			out.Boxes[i].X = x
			out.Boxes[i].W = math.Min(out.Boxes[i].W, Canvas-x)
		}
	case "overlap":
		const gap = 4
		n := float64(len(out.Boxes))
		y := out.Boxes[0].Y
		h := math.Floor((Canvas - GridStep - y - gap*(n-1)) / n)
		for i := range out.Boxes {
			out.Boxes[i].Y, out.Boxes[i].H = y, h
			y += h + gap
		}
	}
	return out
}
