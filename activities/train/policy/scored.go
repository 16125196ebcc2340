package policy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// verdictLine is what the trainer reads of a verdict line (reward.ItemVerdict): the reward role
// imports this package, so the format is read by field names, not by its type.
type verdictLine struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// scoredRollouts returns the rollouts of a policy step: the object in.Rollouts with in.Rewards
// (inline rewards, histories before shards), or the shards of in.Shards concatenated in order, in
// which case it fills in.Rewards from their verdicts objects. The shards are read one at a time,
// so the step never holds more than the rollouts and one shard's verdict text.
func (a *Activities) scoredRollouts(ctx context.Context, in *trainapi.PolicyStepInput) ([]rollout.Rollout, error) {
	if len(in.Shards) == 0 {
		return train.ReadRollouts(ctx, a.Ckpt, in.Rollouts)
	}
	if len(in.Rewards) > 0 || in.Rollouts != "" {
		return nil, train.BadInput(fmt.Errorf("train: policy step %s/%s: set shards, or rollouts and rewards, not both", in.Run, in.Phase))
	}
	var rs []rollout.Rollout
	for _, sh := range in.Shards {
		part, err := train.ReadRollouts(ctx, a.Ckpt, sh.Rollouts)
		if err != nil {
			return nil, err
		}
		scores, err := a.readScores(ctx, sh.Verdicts, part)
		if err != nil {
			return nil, err
		}
		rs = append(rs, part...)
		in.Rewards = append(in.Rewards, scores...)
	}
	return rs, nil
}

// readScores reads a verdicts object and returns its scores, checking that it judged rs, in order.
func (a *Activities) readScores(ctx context.Context, uri string, rs []rollout.Rollout) ([]float64, error) {
	b, err := train.ReadObject(ctx, a.Ckpt, uri)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []float64
	for line := 1; sc.Scan(); line++ {
		var v verdictLine
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, train.BadInput(fmt.Errorf("train: verdicts %s:%d: %w", uri, line, err))
		}
		if i := len(out); i >= len(rs) || rs[i].ID != v.ID {
			return nil, train.BadInput(fmt.Errorf("train: verdicts %s:%d: id %q does not match the rollouts (%d of them)", uri, line, v.ID, len(rs)))
		}
		out = append(out, v.Score)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("train: verdicts %s: %w", uri, err)
	}
	if len(out) != len(rs) {
		return nil, train.BadInput(fmt.Errorf("train: verdicts %s: %d verdicts for %d rollouts", uri, len(out), len(rs)))
	}
	return out, nil
}
