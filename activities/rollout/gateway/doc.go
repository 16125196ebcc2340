// Package gateway is the rollout role's per-episode model endpoint for agents: an OpenAI-compatible
// server (internal/serve) over its own continuous batch of the current policy, served on a listener
// the episode's sandbox can reach (sandbox.Loopback), that records every finished call token-in,
// token-out — the prompt ids the server tokenised, the sampled ids (a final stop token included)
// and their behaviour log-probabilities — with the policy version.
//
// Contract:
//   - Bits: an episode's batch holds one row at a time (a request may not ask for n > 1), so a
//     call's tokens and log-probabilities depend only on its prompt, its parameters and its seed,
//     never on what else the worker runs; a request without a seed gets SeedFor(Options.Seed, k)
//     for its index k in the episode, so a replayed episode samples the same tokens.
//   - Calls are recorded in the order they finished (algorithms/episode.Assemble turns them into
//     trajectory segments); a request that failed or was cancelled records nothing.
//   - Options.MaxCalls bounds an episode's requests; later ones are refused (400,
//     episode_call_budget) in OpenAI's error schema.
//   - Close ends the requests still running and returns once the batch is empty and no handler
//     runs: the decoder is the caller's again.
package gateway

import "github.com/temperml/temper/internal/serve"

// Decoder is a fresh continuous batch of the policy's cached decode (workers' tpu engine makes
// one: tpu.Decoder); an episode uses its own and closes it after.
type Decoder interface {
	serve.Engine
	Close()
}

// Decoders is an engine that can make Decoders (the rollout worker's policy engine).
type Decoders interface {
	NewDecoder() (Decoder, error)
}
