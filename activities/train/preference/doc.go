// Package preference holds the preference-optimisation trainer activities (dpo, ipo, orpo, simpo,
// kto): PrefChunk trains the loss through the kernel's chunk runner with the reference log-probs
// precomputed or scored on the fly, PrefEvaluate measures held-out pairs (accuracy, implicit
// rewards, KL to the reference), RefLogProbs stores the reference model's log-probs with the data
// once, and PreferencesFromModel makes pairs from a checkpoint's verified samples.
package preference
