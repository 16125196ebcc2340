package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "ckpt", summary: "checkpoints: `ckpt ls [URI]`, `ckpt verify URI`, `ckpt export URI DIR`",
		usage: "ls [STORE[/runs/RUN[/PHASE]]] | verify CHECKPOINT_URI | export CHECKPOINT_URI DIR",
		subs:  []string{"ls", "verify", "export"}, flags: flagsOf[ckptCmd]()})
}

type ckptCmd struct {
	home     string
	timeout  time.Duration
	dtype    string
	maxShard string
}

func (c *ckptCmd) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.home, "home", workers.Home(), "state directory; the default store is HOME/store")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up after this long (an unreachable bucket otherwise retries)")
	fs.StringVar(&c.dtype, "dtype", "", "export: weight dtype F32, BF16, F16 or F64 (default: the dtype the model came in)")
	fs.StringVar(&c.maxShard, "max-shard-size", "5GB", "export: cut the weights into shards of at most this size (bytes or e.g. 500MB), as save_pretrained does")
}

func (c *ckptCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("usage: temper ckpt ls [URI] | verify URI | export URI DIR")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch args[0] {
	case "ls":
		return c.ls(ctx, args)
	case "verify":
		if len(args) != 2 {
			return usageErr("usage: temper ckpt verify CHECKPOINT_URI")
		}
		if err := ckpt.Verify(ctx, args[1]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: every file matches its manifest (size and sha256)\n", args[1])
		return nil
	case "export":
		if len(args) != 3 {
			return usageErr("usage: temper ckpt export CHECKPOINT_URI DIR")
		}
		return c.export(ctx, args[1], args[2])
	}
	return usageErr("unknown ckpt command %q (ls, verify, export)", args[0])
}

// export is `temper ckpt export URI DIR`: the checkpoint as a Hugging Face model directory, in the
// dtype the model came in unless --dtype says otherwise, sharded above --max-shard-size.
func (c *ckptCmd) export(ctx context.Context, uri, dir string) error {
	shard, err := hf.ParseSize(c.maxShard)
	if err != nil {
		return usageErr("--max-shard-size: %v", err)
	}
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	opt := hf.WriteOptions{DType: safetensors.DType(strings.ToUpper(c.dtype)), MaxShardSize: shard}
	if err := writeModelDir(ctx, cl, uri, dir, opt, false); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "exported %s to %s as a Hugging Face model directory\n", uri, dir)
	return nil
}

// writeModelDir writes the model at uri (adapters folded in) into dir as a Hugging Face model
// directory: what `ckpt export` and `lora merge` write. mustMerge refuses a checkpoint without
// adapters (lora merge) before anything is written.
func writeModelDir(ctx context.Context, cl *ckpt.Client, uri, dir string, opt hf.WriteOptions, mustMerge bool) error {
	m, err := train.Loader{Ckpt: cl}.Load(ctx, uri, train.LoadOptions{Want: train.WantWeights})
	if err != nil {
		return err
	}
	if mustMerge && !m.Merged {
		return fmt.Errorf("lora merge %s: not a LoRA checkpoint (no %s)", uri, hf.AdapterConfigFile)
	}
	return train.WriteDir(tpu.DirSink(dir), m, opt)
}

// ls is `temper ckpt ls [URI]`: the committed checkpoints under a store, run or phase.
func (c *ckptCmd) ls(ctx context.Context, args []string) error {
	uri := pipeline.DefaultStore(c.home)
	if len(args) > 1 {
		uri = args[1]
	}
	refs, err := ckpt.ListCheckpoints(ctx, uri)
	if err != nil {
		return err
	}
	for _, r := range refs {
		best := ""
		if r.Best {
			best = " best"
		}
		fmt.Fprintf(stdout, "%s%s\n", r.URI, best)
	}
	if len(refs) == 0 {
		fmt.Fprintf(stdout, "no committed checkpoints under %s\n", uri)
	}
	return nil
}
