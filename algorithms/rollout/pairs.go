package rollout

import (
	"fmt"
	"math"
)

// Pair is a preference pair made from one prompt's scored samples: indices into the rollouts.
type Pair struct {
	Group    int     // the prompt's Group
	Chosen   int     // a sample with the group's highest score (the first in file order)
	Rejected int     // a sample with the group's lowest score (the first in file order)
	Gap      float64 // score(Chosen) − score(Rejected), > 0
}

// PairStats counts what PreferencePairs made of an iteration's groups.
type PairStats struct {
	Groups int // prompts (groups) seen
	Pairs  int // pairs formed: one per group whose scores differ
	Ties   int // groups skipped because every sample scored the same
}

// PreferencePairs makes online DPO's pairs from scored samples: for each group (Groups' order) the
// best sample is chosen and the worst rejected, as with two samples per prompt and, with more,
// best-against-worst (the pair whose preference the scores are surest of). A group whose samples
// all score the same (a tie: both right, or both wrong) says nothing about which is better and
// is skipped, as is a group of one sample. scores are per rollout, in rs's order; a non-finite
// score is an error naming the rollout.
func PreferencePairs(rs []Rollout, scores []float64) ([]Pair, PairStats, error) {
	if len(scores) != len(rs) {
		return nil, PairStats{}, fmt.Errorf("rollout: pairs: %d scores for %d rollouts", len(scores), len(rs))
	}
	for i, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return nil, PairStats{}, fmt.Errorf("rollout: pairs: rollout %s scored %g", rs[i].ID, s)
		}
	}
	var pairs []Pair
	var st PairStats
	for _, g := range Groups(rs) {
		st.Groups++
		best, worst := g[0], g[0]
		for _, i := range g[1:] {
			if scores[i] > scores[best] {
				best = i
			}
			if scores[i] < scores[worst] {
				worst = i
			}
		}
		if scores[best] == scores[worst] {
			st.Ties++
			continue
		}
		pairs = append(pairs, Pair{Group: rs[best].Group, Chosen: best, Rejected: worst, Gap: scores[best] - scores[worst]})
	}
	st.Pairs = len(pairs)
	return pairs, st, nil
}
