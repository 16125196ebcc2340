// Package lm holds the language-model trainer activities: Init commits a seeded model as step 0,
// Chunk trains next-token steps on packed examples (every weight, or LoRA adapters on a frozen
// base) through the kernel's chunk runner, and Evaluate measures a checkpoint on held-out examples
// (loss, perplexity, exact match and pass@k with the task's checker).
package lm
