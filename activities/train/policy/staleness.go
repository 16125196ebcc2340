package policy

import (
	"fmt"

	"github.com/temperml/temper/algorithms/rollout"
)

// stalenessStats sets the staleness histogram of an iteration stepping policy version version:
// staleness_lag_K counts the policy's completion tokens (lengths[i] of rollout i; an episode's tool
// results excluded) sampled K versions before it, per token (a partial rollout's tokens span
// versions: rollout.Rollout.Versions), with staleness_mean and staleness_max. Sync runs log
// staleness_lag_0 alone; async runs show how far their rollouts lag, every iteration.
func stalenessStats(metrics map[string]float64, rs []rollout.Rollout, lengths []int, version int) {
	var lags []float64
	var n, sum float64
	for i := range rs {
		r := &rs[i]
		for t := range lengths[i] {
			if r.Policy != nil && !r.Policy[t] {
				continue
			}
			lag := max(0, version-r.VersionOf(t))
			for len(lags) <= lag {
				lags = append(lags, 0)
			}
			lags[lag]++
			n++
			sum += float64(lag)
		}
	}
	for k, c := range lags {
		metrics[fmt.Sprintf("staleness_lag_%d", k)] = c
	}
	if n > 0 {
		metrics["staleness_mean"], metrics["staleness_max"] = sum/n, float64(len(lags)-1)
	}
}
