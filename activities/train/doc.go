// Package train is the trainer role's shared kernel; the activities themselves live in one package
// per family, each with its own Register:
//
//   - lm: Init (a seeded starting checkpoint), Chunk (next-token steps, optionally LoRA), Evaluate
//     (held-out loss, perplexity, exact match and pass@k with a task's checker);
//   - preference: PrefChunk, PrefEvaluate, RefLogProbs, PreferencesFromModel;
//   - rewardmodel: RewardInit (a value head added), RewardChunk (Bradley–Terry), RewardEvaluate;
//   - policy: PolicyStep (one RL update, one plan: rows from memory or streamed from the store;
//     group or GAE advantages; PPO's critic in ppo.go). Its rollouts and rewards come inline, or by
//     reference as an iteration's shards and their verdicts objects (scored.go).
//
// Their names and I/O types are in package trainapi (what workflows import). This package holds
// what the families share: the dependencies (Activities: the worker's store client and engine
// factory), Retain (marks the best checkpoint, prunes old ones; registered by Register), the one
// chunk runner (RunChunk: it returns the checkpoint an earlier attempt committed, owns the LR
// schedule, heartbeats, the non-finite policy, state.json and the commit; an objective supplies
// only its batches and its step; LR and PolicyLR are every kind's learning rate), the one loader
// (Load: a checkpoint, a Hugging Face model directory, LoRA adapters on their base, a value head;
// load.go) with its writer (WriteModel, WriteDir), the one JSONL reader over the injected store
// (ReadLines) and the host batch helpers. The Hugging Face and PEFT files themselves are
// algorithms/hf's.
//
// Every activity is safe to retry from its input: a checkpoint's path derives from run, phase and
// step, so a retried chunk whose first attempt committed returns that commit, and one whose first
// attempt died recomputes from its starting checkpoint — training is deterministic (seeded init,
// deterministic data order, sequential executor), so it produces the same checkpoint bit for bit.
//
// The math runs on an Engine, declared here in the parts its consumers use (WeightIO, Stepper,
// LMTrainer, Scorer, Sampler) and satisfied by the tpu runtime (workers wire it), so no trainer
// package imports tpu. An objective's inputs travel as its own batch type (algorithms/objective),
// never as tensors by position. What an engine can do beyond that (LoRA adapters, a value head,
// full logits) is in its Caps, asked for once by the loader that needs it.
package train
