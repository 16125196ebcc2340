package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/temperml/temper/internal/bench"
	"github.com/temperml/temper/workers"
)

// modelDirFlags are the flags of `bench model-dir`.
type modelDirFlags struct {
	genBatches                  string
	loraBatch, loraSeq, loraRnk int
	loraSteps                   int
}

func (f *modelDirFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.genBatches, "gen-batches", "1,8", "bench model-dir: rows of each cached-generation measurement (--gen-tokens new tokens each, greedy)")
	fs.IntVar(&f.loraBatch, "lora-batch", 4, "bench model-dir: rows of the LoRA SFT step (negative: skip it)")
	fs.IntVar(&f.loraSeq, "lora-seq", 512, "bench model-dir: tokens per row of the LoRA SFT step")
	fs.IntVar(&f.loraRnk, "lora-rank", 8, "bench model-dir: LoRA rank (all-linear)")
	fs.IntVar(&f.loraSteps, "lora-steps", 1, "bench model-dir: timed LoRA steps after the first (which compiles)")
}

// modelDir is `temper bench model-dir DIR`.
func (c *benchCmd) modelDir(ctx context.Context, dir string) error {
	var batches []int
	for _, f := range strings.Split(c.md.genBatches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return usageErr("bench model-dir: --gen-batches %q: want positive row counts, comma-separated", c.md.genBatches)
		}
		batches = append(batches, n)
	}
	if c.md.loraSeq < 1 || c.md.loraRnk < 1 || c.md.loraSteps < 1 || c.genTokens < 1 {
		return usageErr("bench model-dir: --lora-seq, --lora-rank, --lora-steps and --gen-tokens must be positive")
	}
	eo := workers.EngineOptions{Executor: c.mode, ExecTimeout: -1} // a 1B LoRA step on 2 shared cores outlasts any watchdog
	eo.Backend, eo.Plugin = backendFlags(c.backend, c.plugin)
	rep, err := bench.ModelDir(ctx, bench.ModelDirOptions{Dir: localDir(dir), NewEngine: workers.NewTrainEngine(eo),
		GenBatches: batches, GenTokens: c.genTokens, PromptLen: c.peer.genPromptLen,
		LoRABatch: c.md.loraBatch, LoRASeq: c.md.loraSeq, LoRARank: c.md.loraRnk, LoRASteps: c.md.loraSteps,
		Remat: c.remat, Attention: c.attention, Progress: os.Stderr})
	if err != nil {
		return err
	}
	if c.asJSON {
		b, err := rep.JSON()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	rep.Text(stdout)
	return nil
}
