package policy

import (
	"fmt"

	"github.com/temperml/temper/activities/train"
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

// noSegments refuses rollouts with further segments in a step that trains one row per rollout
// (PPO's critic): op prefixes the error, instead says how to train them.
func noSegments(rs []rollout.Rollout, op, instead string) error {
	for _, r := range rs {
		if len(r.Segments) > 0 {
			return train.BadInput(fmt.Errorf("%s: rollout %s is an agent's episode of %d segments (its calls did not extend one context); this step trains one row per rollout: %s",
				op, r.ID, len(r.Segments)+1, instead))
		}
	}
	return nil
}
