// Package advantage computes policy-gradient advantages on the host from scalar rewards, in float64:
// group-relative baselines (GRPO, Dr. GRPO, RLOO), batch-normalised returns (REINFORCE++), GAE for
// PPO, and DAPO's reward-side helpers (overlong shaping, dynamic-sampling group filter).
//
// Conventions: a group is the G completions of one prompt, given as one []float64 of rewards (groups
// may differ in size); results have the caller's shape. Token-level functions take [batch][seq]
// slices and a [batch][seq] response mask (true on counted tokens) and return 0 on masked positions.
// Errors name the group or row and the bad value; nothing panics. Plain Go, standard library only.
package advantage
