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
			rs = append(rs, rollout.Rollout{ID: rs[i].ID, Group: rs[i].Group, PromptTokens: s.PromptTokens, Tokens: s.Tokens,
				LogProbs: s.LogProbs, Policy: s.Policy, PolicyVersion: rs[i].PolicyVersion})
			adv = append(adv, adv[i])
		}
	}
	return rs, adv, out
}

// noSegments refuses rollouts with further segments in a step that trains one row per rollout
// (PPO's critic, the streamed minibatches): op prefixes the error, instead says how to train them.
func noSegments(rs []rollout.Rollout, op, instead string) error {
	for _, r := range rs {
		if len(r.Segments) > 0 {
			return train.BadInput(fmt.Errorf("%s: rollout %s is an agent's episode of %d segments (its calls did not extend one context); this step trains one row per rollout: %s",
				op, r.ID, len(r.Segments)+1, instead))
		}
	}
	return nil
}
