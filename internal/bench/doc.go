// Package bench holds the benchmarks behind `temper bench`: the machine's attainable float32 matmul
// rate on the engine's best kernel and its memory bandwidth (MeasurePeak), the engine against itself
// with MFU against that peak and against its PyTorch peer (Model), async against sync GRPO (RL),
// rollout generation against rollout worker processes (RolloutWorkers), RL against continued SFT
// (RLvsSFT) and distillation against fine-tuning (Distill).
//
// Each takes an options struct and returns a Report (text for people, JSON for scripts); progress goes
// to the options' Log. The pipeline benchmarks run on a private embedded stack in a temporary home that
// they remove, so their runs never mix with the user's. Bad options are *usage.Error (the command's exit
// code 2); the flags they name are `temper bench`'s, its only front end, which Flags declares (Bind)
// and runs (Run). Same options, same workload: the pipelines are fixed and seeded, only the timings
// vary with the machine.
package bench
