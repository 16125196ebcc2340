package policy

import (
	"github.com/temperml/temper/algorithms/rollout"
)

// segmentRows adds a row for every further segment of the kept rollouts (an agent's episode whose
// calls did not all extend one context: rollout.Segments), right after its rollout's row in idx and
// with its rollout's group and advantage, so that each segment is trained under the context the
// model saw. Rollouts without segments leave rs, adv and idx as they are.
func segmentRows(rs []rollout.Rollout, adv []float64, idx []int) ([]rollout.Rollout, []float64, []int) {
	extra := 0
	for _, i := range idx {
		extra += len(rs[i].Segments)
	}
	if extra == 0 {
		return rs, adv, idx
	}
	out := make([]int, 0, len(idx)+extra)
	for _, i := range idx {
		out = append(out, i)
		for _, s := range rs[i].Segments {
			out = append(out, len(rs))
			rs = append(rs, segmentRow(rs[i], s))
			adv = append(adv, adv[i])
		}
	}
	return rs, adv, out
}

// segmentRow is the row of episode r's further segment s: its own prompt and tokens, the episode's
// group and version.
func segmentRow(r rollout.Rollout, s rollout.Segment) rollout.Rollout {
	return rollout.Rollout{ID: r.ID, Group: r.Group, PromptTokens: s.PromptTokens, Tokens: s.Tokens,
		LogProbs: s.LogProbs, Policy: s.Policy, PolicyVersion: r.PolicyVersion}
}

// rowRef names a row of a streamed step, which holds no rollout until it trains on it: rollout i
// (its index across the shards) and seg, 0 for the rollout's own row or k for its k-th further
// segment.
type rowRef struct{ i, seg int }

// segmentRefs is segmentRows for a streamed step: the rows of the kept rollouts idx in the same
// order (so that a minibatch holds the same rows either way), each with its advantage. rs need hold
// only as many Segments as each rollout has (their contents are read when the row is trained).
func segmentRefs(rs []rollout.Rollout, adv []float64, idx []int) ([]rowRef, []float64) {
	refs, radv := make([]rowRef, 0, len(idx)), make([]float64, 0, len(idx))
	for _, i := range idx {
		for k := range len(rs[i].Segments) + 1 {
			refs = append(refs, rowRef{i: i, seg: k})
			radv = append(radv, adv[i])
		}
	}
	return refs, radv
}

// rowEpisodes maps every row of idx, as segmentRows laid them out from n rollouts, to its rollout:
// a rollout's own row is itself, a further segment's row (n or more) the rollout it follows.
func rowEpisodes(idx []int, n int) []int {
	ep := make([]int, n, len(idx)+n)
	for i := range n {
		ep[i] = i
	}
	cur := -1
	for _, r := range idx {
		if r < n {
			cur = r
			continue
		}
		for len(ep) <= r {
			ep = append(ep, -1)
		}
		ep[r] = cur
	}
	return ep
}
