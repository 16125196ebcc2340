// Package sample turns next-token logits into tokens on the host: greedy, temperature, top-k,
// top-p, min-p, a repetition penalty, stop tokens, token sequences and strings, and a token budget,
// with one seeded RNG per request. The order is transformers': the penalty on the logits, then
// temperature, top-k, top-p and min-p on the probabilities.
//
// Determinism contract: request i draws from its own RNG, seeded with Options.SeedFor(i), and
// consumes exactly one uniform number per sampled token, so the same seed and the same logits give
// the same tokens whatever else is in the batch. Greedy (Temperature 0) consumes nothing.
//
// Log-probabilities reported by generators are those of the model itself (temperature 1, no
// penalty, no top-k, top-p or min-p truncation): log softmax(logits)[token]. That is what
// TokenLogProbs recomputes on prompt+completion, and what importance ratios against a trainer's
// recomputation need: the off-policy corrections compare π_old with these, so under a sampler that
// is not the model (temperature ≠ 1, truncation, penalty) they correct the trainer–engine numerics
// and the staleness, not the sampler's reshaping, exactly as vLLM's default raw log-probs do.
//
// Plain Go, standard library only (LogProb's exponentials in simd/archsimd lanes where the build
// has GOEXPERIMENT=simd on amd64, to the same bits as the scalar formula).
package sample
