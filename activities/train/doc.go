// Package train holds the trainer role's activities: Init (a seeded starting checkpoint), Chunk (train N
// steps from checkpoint A with data cursor C and commit checkpoint B) and Evaluate (held-out loss,
// perplexity, exact match and pass@k with a task's checker).
//
// Every activity is safe to retry from its input: a checkpoint's path derives from run, phase and step,
// so a retried Chunk whose first attempt committed returns that commit, and one whose first attempt died
// recomputes from A — training is deterministic (seeded init, deterministic data order, sequential
// executor), so it produces the same B bit for bit.
//
// The math runs on an Engine, an interface declared here and satisfied by the tpu runtime (workers
// wire it), so this package never imports tpu.
package train
