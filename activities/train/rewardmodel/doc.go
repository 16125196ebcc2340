// Package rewardmodel holds the reward-model trainer activities: RewardInit adds a seeded value
// head to a starting checkpoint (or builds a fresh model with one), RewardChunk trains the
// Bradley–Terry objective through the kernel's chunk runner, and RewardEvaluate measures held-out
// pairwise accuracy, loss and margins. PRMChunk and PRMEvaluate (prm.go) are the process reward
// model's: the same init and chunk runner, the objective.PRM step (the value head read at every
// step's end, binary cross-entropy against step labels) and held-out step accuracy.
//
// With RewardInitInput.Vision the reward model is a vision one (vision.go): a SigLIP tower with a
// value head scoring images, trained on JSONL image pairs whose images are read through the store
// client, preprocessed once per phase and cached in the store by content hash; bad images are
// non-retryable errors naming file, line and field, raised before any step. Chunks and
// evaluations recognise a vision checkpoint by its config.json. The engine is a VisionEngine from
// the factory WithVision gives Register (workers wire tpu.VisionRuntime).
package rewardmodel
