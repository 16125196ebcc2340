// Package policy holds the RL trainer activity: PolicyStep turns one iteration's scored rollouts
// (read from the store by URI) into advantages and trains the policy loss for the configured
// epochs and minibatches, committing the next policy version; with loss.algorithm ppo it also
// trains a value-head critic (GAE advantages), kept in its own checkpoint file.
package policy
