package advantage

import (
	"fmt"
	"math"
	"slices"
)

// OverlongConfig is DAPO's overlong reward shaping (Yu et al. 2025, §3.4): a length-aware penalty that
// grows linearly through a buffer zone before the hard limit, instead of punishing truncated answers
// (whose reasoning may be sound) as harshly as wrong ones.
type OverlongConfig struct {
	MaxLen   int     `json:"max_len" default:"20480" help:"L_max: the generation budget in tokens"`
	CacheLen int     `json:"cache_len" default:"4096" help:"L_cache: the soft-punishment buffer below L_max"`
	Penalty  float64 `json:"penalty" default:"1" help:"the penalty reached at L_max (the paper's is 1)"`
}

// DefaultOverlongConfig returns the paper's setting: L_max 20480, L_cache 4096, penalty 1.
func DefaultOverlongConfig() OverlongConfig {
	return OverlongConfig{MaxLen: 20480, CacheLen: 4096, Penalty: 1}
}

// Validate names the first bad field.
func (c OverlongConfig) Validate() error {
	switch {
	case c.MaxLen <= 0:
		return fmt.Errorf("advantage: overlong max_len=%d: must be > 0", c.MaxLen)
	case c.CacheLen <= 0 || c.CacheLen > c.MaxLen:
		return fmt.Errorf("advantage: overlong cache_len=%d: must be in [1, max_len=%d]", c.CacheLen, c.MaxLen)
	case !(c.Penalty >= 0) || math.IsInf(c.Penalty, 0):
		return fmt.Errorf("advantage: overlong penalty=%g: must be ≥ 0", c.Penalty)
	}
	return nil
}

// OverlongPenalty is DAPO's R_length(y) (scaled by cfg.Penalty, 1 in the paper), for |y| = length:
//
//	0                                   |y| ≤ L_max − L_cache
//	((L_max − L_cache) − |y|) / L_cache   L_max − L_cache < |y| ≤ L_max
//	−1                                  L_max < |y|
//
// It is ≤ 0 and reaches −Penalty exactly at L_max. cfg must be valid.
func OverlongPenalty(length int, cfg OverlongConfig) float64 {
	free := cfg.MaxLen - cfg.CacheLen
	switch {
	case length <= free:
		return 0
	case length <= cfg.MaxLen:
		return float64(free-length) / float64(cfg.CacheLen) * cfg.Penalty
	}
	return -cfg.Penalty
}

// ShapeOverlong returns rewards[i] + OverlongPenalty(lengths[i]) (a new slice), where lengths are
// response lengths in tokens. Apply it before computing advantages.
func ShapeOverlong(rewards []float64, lengths []int, cfg OverlongConfig) ([]float64, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(rewards) != len(lengths) {
		return nil, fmt.Errorf("advantage: overlong: %d rewards for %d lengths", len(rewards), len(lengths))
	}
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		if lengths[i] < 0 {
			return nil, fmt.Errorf("advantage: overlong: sample %d: length %d: must be ≥ 0", i, lengths[i])
		}
		out[i] = r + OverlongPenalty(lengths[i], cfg)
	}
	return out, nil
}

// FilterGroups is DAPO's dynamic sampling filter (Yu et al. 2025, §3.2): a group whose rewards are all
// equal (all correct or all wrong) has zero group-relative advantage, so it only dilutes the batch's
// gradient; DAPO drops such groups and samples more prompts until the batch is full again.
//
// It returns the indices of the groups to keep, in order, and how many were dropped, so the caller can
// keep its rollouts aligned and refill. Equality is exact (verifier rewards are discrete; pass the
// metric DAPO filters on — accuracy — rather than a shaped reward if shaping would break ties). A group
// of one sample counts as all-equal and is dropped (verl keeps singletons; they carry no GRPO signal).
// Empty groups are dropped too.
//
//	groups: [groups][G_g] rewards → keep: indices into groups
func FilterGroups(groups [][]float64) (keep []int, dropped int) {
	for g, r := range groups {
		if len(r) > 1 && slices.Min(r) != slices.Max(r) {
			keep = append(keep, g)
		} else {
			dropped++
		}
	}
	return keep, dropped
}
