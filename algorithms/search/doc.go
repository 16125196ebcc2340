// Package search is verifier-guided Monte Carlo tree search over reasoning steps, as pure data
// logic: the caller samples from the model and runs the verifier through the Env it hands to Run.
//
// A tree's root is a prompt; a node is one more step (a scratchpad line, or a fixed number of
// tokens). A simulation selects a leaf by PUCT with the policy's step prior, expands it with K
// sampled candidate steps (duplicates merged; the prior is their normalised sequence probability),
// evaluates every new child by the verifier's score of one rollout to the end (a terminal step is
// scored as it is), and backs the scores up as running means. Every sample is seeded by (tree seed,
// node, purpose, k), so a tree is the same whatever else shares its batches, and a rerun of the same
// input rebuilds it bit for bit. From a finished tree come the best verified solution (SFT data),
// preference pairs of sibling steps whose values differ by more than a margin (each side a complete
// solution: the chosen one verified, the rejected one not), and statistics.
//
// With Params.Value prm a new node is valued by a process reward model's score of its step (the
// Env is a StepValuer: one forward pass over the path, no generation) instead of a rollout; such a
// node has no completion of its own, so solutions and pairs come from terminal nodes only.
//
// The "sample" strategy is the peer of the same shape: each simulation draws K whole completions
// from the root (best-of-N rejection sampling), so both strategies spend forward tokens under one
// budget and write the same data.
package search
