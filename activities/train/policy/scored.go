package policy

import (
	"context"
	"fmt"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// scoredRollouts returns the rollouts of a policy step: the object in.Rollouts with in.Rewards
// (inline rewards, histories before shards), or the shards of in.Shards concatenated in order, in
// which case it fills in.Rewards from their verdicts objects (train.ReadScoredShards).
func (a *Activities) scoredRollouts(ctx context.Context, in *trainapi.PolicyStepInput) ([]rollout.Rollout, error) {
	if len(in.Shards) == 0 {
		return train.ReadRollouts(ctx, a.Ckpt, in.Rollouts)
	}
	if len(in.Rewards) > 0 || in.Rollouts != "" {
		return nil, train.BadInput(fmt.Errorf("train: policy step %s/%s: set shards, or rollouts and rewards, not both", in.Run, in.Phase))
	}
	rs, scores, err := train.ReadScoredShards(ctx, a.Ckpt, in.Shards)
	if err != nil {
		return nil, err
	}
	in.Rewards = append(in.Rewards, scores...)
	return rs, nil
}
