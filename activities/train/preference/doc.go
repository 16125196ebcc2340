// Package preference holds the preference-optimisation trainer activities (dpo, ipo, orpo, simpo,
// kto): PrefChunk trains the loss through the kernel's chunk runner with the reference log-probs
// precomputed or scored on the fly, PrefEvaluate measures held-out pairs (accuracy, implicit
// rewards, KL to the reference), RefLogProbs stores the reference model's log-probs with the data
// once, PreferencesFromModel makes pairs from a checkpoint's verified samples, and OnlineDPOStep is
// the online_dpo phase's policy step (pairs of the current policy's scored rollouts, each prompt's
// best against its worst, trained with the dpo or ipo loss).
package preference
