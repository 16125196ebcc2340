package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/hf"
)

func init() {
	register(&command{name: "lora", summary: "LoRA checkpoints: `lora merge CKPT DIR` writes base + adapters as a plain model directory; `lora export CKPT DIR` writes the PEFT adapter directory",
		usage: "merge LORA_CHECKPOINT_URI DIR | export LORA_CHECKPOINT_URI DIR", subs: []string{"merge", "export"}, flags: flagsOf[loraCmd]()})
}

type loraCmd struct{ timeout time.Duration }

func (c *loraCmd) bind(fs *flag.FlagSet) {
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up after this long (an unreachable bucket otherwise retries)")
}

func (c *loraCmd) run(ctx context.Context, args []string) error {
	if len(args) != 3 || (args[0] != "merge" && args[0] != "export") {
		return usageErr("usage: temper lora merge LORA_CHECKPOINT_URI DIR | temper lora export LORA_CHECKPOINT_URI DIR")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	uri, dir := args[1], args[2]
	if args[0] == "export" {
		return exportAdapters(ctx, cl, uri, dir)
	}
	if err := writeModelDir(ctx, cl, uri, dir, hf.WriteOptions{}, true); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "merged %s into %s (%s, %s)\n", uri, dir, hf.ConfigFile, hf.WeightsFile)
	return nil
}

// exportAdapters copies a LoRA checkpoint's adapter_config.json and adapter_model.safetensors into
// dir: a PEFT adapter directory (its base_model_name_or_path is the base checkpoint's URI).
func exportAdapters(ctx context.Context, cl *ckpt.Client, uri, dir string) error {
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return err
	}
	if !train.IsAdapterCheckpoint(ck) {
		return fmt.Errorf("lora export %s: not a LoRA checkpoint (no %s)", uri, hf.AdapterConfigFile)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lora export: %w", err)
	}
	for _, name := range []string{hf.AdapterConfigFile, hf.AdapterWeightsFile} {
		if err := ck.ExportFile(ctx, name, dir); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "exported %s, %s of %s to %s\n", hf.AdapterConfigFile, hf.AdapterWeightsFile, uri, dir)
	return nil
}
