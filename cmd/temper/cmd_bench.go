package main

import (
	"context"
	"flag"

	"github.com/temperml/temper/internal/bench"
)

func init() {
	register(&command{name: "bench",
		summary: "benchmarks: `bench peak` (the machine's attainable float32 matmul GFLOP/s on the engine's best kernel, and memory bandwidth); `bench model` (train tok/s, GFLOP/s, MFU against the measured peak, memory, cached vs uncached generation; --peer: Temper/PyTorch ratios); `bench rl` (async vs sync GRPO; --rollout-workers 1,2: rollout generation vs worker processes); `bench rl-vs-sft` (RL vs continued SFT, same training time); `bench distill` (a student distilled from a bigger teacher vs one fine-tuned on the same labels, same training time); `bench model-dir DIR` (a Hugging Face model directory: load time, peak RSS, cached generation tok/s, one LoRA SFT step)",
		usage:   "peak | model | rl | rl-vs-sft | distill | serve | model-dir DIR", subs: bench.Subcommands, flags: flagsOf[benchCmd]()})
}

// benchCmd is `temper bench`: its flags and benchmarks are internal/bench's.
type benchCmd struct{ bench.Flags }

func (c *benchCmd) bind(fs *flag.FlagSet) { c.Bind(fs) }

func (c *benchCmd) run(ctx context.Context, args []string) error { return c.Run(ctx, args, stdout) }
