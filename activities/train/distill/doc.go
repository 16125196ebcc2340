// Package distill holds the distillation trainer activities: DistillChunk trains a student towards a
// teacher checkpoint (any size, the same tokenizer) through the kernel's chunk runner, with the
// teacher's distributions computed on the fly (the teacher held beside the student) or read from
// DistillTargets' stored top-k targets, on the data's completions and, with loss.lambda > 0, on the
// student's own samples of the same prompts (GKD's on-policy mixture). Evaluation is the language
// model's (lm.Evaluate): a distilled student is an ordinary causal LM.
//
// The teacher's logits come from an engine whose Caps offer a train.LogitReader (workers' tpu engine
// does; a teacher that cannot is refused when it is loaded); sampling seeds derive from the data cursor, so a retried chunk recomputes the same samples
// and the same checkpoint bit for bit.
package distill
