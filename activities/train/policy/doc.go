// Package policy holds the RL trainer activity. PolicyStep turns one iteration's scored rollouts into
// the next policy version by one plan (policy.go): rows held in memory or streamed from the store one
// minibatch at a time (source.go, stream.go); group advantages per sequence or GAE advantages per
// token from a value-head critic trained beside the policy (advantages.go; loss.algorithm ppo, the
// critic kept in its own checkpoint file, ppo.go); π_old, V_old and π_ref read before any update; the
// configured epochs of one optimizer step per minibatch; the chunk runner's commit. A retried step
// returns the version an earlier attempt committed, and a recomputed one is the same bit for bit.
package policy
