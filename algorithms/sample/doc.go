// Package sample turns next-token logits into tokens on the host: greedy, temperature, top-k,
// top-p, stop tokens and a token budget, with one seeded RNG per request.
//
// Determinism contract: request i draws from its own RNG, seeded with Options.SeedFor(i), and
// consumes exactly one uniform number per sampled token, so the same seed and the same logits give
// the same tokens whatever else is in the batch. Greedy (Temperature 0) consumes nothing.
//
// Log-probabilities reported by generators are those of the model itself (temperature 1, no top-k
// or top-p truncation): log softmax(logits)[token]. That is what TokenLogProbs recomputes on
// prompt+completion, and what importance ratios against a trainer's recomputation need.
//
// Plain Go, standard library only.
package sample
