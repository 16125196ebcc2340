// Package rewardmodel holds the reward-model trainer activities: RewardInit adds a seeded value
// head to a starting checkpoint (or builds a fresh model with one), RewardChunk trains the
// Bradley–Terry objective through the kernel's chunk runner, and RewardEvaluate measures held-out
// pairwise accuracy, loss and margins.
package rewardmodel
