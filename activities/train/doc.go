// Package train holds the trainer role's activities:
//
//   - language model: Init (a seeded starting checkpoint), Chunk (next-token steps, optionally LoRA),
//     Evaluate (held-out loss, perplexity, exact match and pass@k with a task's checker);
//   - preference: PrefChunk, PrefEvaluate, RefLogProbs (reference log-probs computed once and stored
//     with the data), PreferencesFromModel (pairs made from the model's verified samples);
//   - reward model: RewardInit (a value head added), RewardChunk (Bradley–Terry), RewardEvaluate;
//   - policy: PolicyStep (one RL update; PPO's critic in ppo.go). Its rollouts and rewards come
//     inline, or by reference as an iteration's shards and their verdicts objects (scored.go); by
//     reference and in minibatches it streams them from the store (stream.go);
//   - Retain (marks the best checkpoint, prunes old ones).
//
// The three chunk activities share one runner (chunkrun.go): it returns the checkpoint an earlier
// attempt committed, owns the LR schedule, heartbeats, the non-finite policy (a step whose loss or
// gradient norm is NaN/Inf is counted, not averaged; outputs stay finite), state.json and the commit;
// an objective supplies only its batches and its step.
//
// Every activity is safe to retry from its input: a checkpoint's path derives from run, phase and step,
// so a retried chunk whose first attempt committed returns that commit, and one whose first attempt died
// recomputes from its starting checkpoint — training is deterministic (seeded init, deterministic data
// order, sequential executor), so it produces the same checkpoint bit for bit.
//
// The math runs on an Engine, an interface declared here and satisfied by the tpu runtime (workers
// wire it), so this package never imports tpu.
package train
