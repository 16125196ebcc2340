package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/internal/modeldir"
)

func init() {
	register(&command{name: "model",
		summary: "Hugging Face model directories: `model inspect DIR` (family, sizes, dtype, tokenizer, chat template, what Temper does with each config.json field); `model init --like DIR|SHAPE --out DIR` (a random-initialised model of a real shape)",
		usage:   "inspect DIR | init --like DIR|" + strings.Join(hf.LikeNames(), "|") + " --out DIR",
		subs:    []string{"inspect", "init"}, flags: flagsOf[modelCmd]()})
}

type modelCmd struct {
	asJSON    bool
	like, out string
	dtype     string
	seed      uint64
	sets      multiFlag
	tokenizer string
	maxShard  string
}

func (c *modelCmd) bind(fs *flag.FlagSet) {
	fs.BoolVar(&c.asJSON, "json", false, "inspect: print JSON")
	fs.StringVar(&c.like, "like", "", "init: a model directory whose config.json (and tokenizer) to copy, or a known shape: "+strings.Join(hf.LikeNames(), ", "))
	fs.StringVar(&c.out, "out", "", "init: the directory to write (must not exist or be empty)")
	fs.StringVar(&c.dtype, "dtype", "", "init: weight dtype bf16, f16 or f32 (default: the dtype of --like's config.json)")
	fs.Uint64Var(&c.seed, "seed", 1, "init: weights ~ N(0, 0.02²) from this seed (norm scales 1)")
	fs.Var(&c.sets, "set", "init: override a config.json field, key=value (value as JSON, else a string), e.g. --set num_hidden_layers=2 (repeatable)")
	fs.StringVar(&c.tokenizer, "tokenizer", "", "init: copy tokenizer.json, tokenizer_config.json and chat_template.jinja from this directory (default: --like DIR's, or the shape's family's, when Temper carries one)")
	fs.StringVar(&c.maxShard, "max-shard-size", "5GB", "init: cut the weights into shards of at most this size, as save_pretrained does")
}

func (c *modelCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("usage: temper model inspect DIR | init --like DIR|SHAPE --out DIR")
	}
	switch args[0] {
	case "inspect":
		if len(args) != 2 {
			return usageErr("usage: temper model inspect DIR [--json]")
		}
		return c.inspect(args[1])
	case "init":
		if len(args) != 1 || c.like == "" || c.out == "" {
			return usageErr("usage: temper model init --like DIR|%s --out DIR [--dtype bf16|f16|f32] [--seed N] [--set key=value ...]", strings.Join(hf.LikeNames(), "|"))
		}
		r, err := modeldir.Init(modeldir.InitOptions{Like: c.like, Out: c.out, DType: c.dtype, Seed: c.seed, Sets: c.sets,
			Tokenizer: c.tokenizer, MaxShard: c.maxShard})
		if err != nil {
			return err
		}
		r.Text(stdout)
		return nil
	}
	return usageErr("unknown model command %q (inspect, init)", args[0])
}

// inspect is `temper model inspect DIR`: the report, and exit status 2 when loading would refuse
// the directory (after the report says why).
func (c *modelCmd) inspect(dir string) error {
	dir = modeldir.LocalDir(dir)
	rep, err := modeldir.Inspect(dir)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if c.asJSON {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		rep.Text(stdout)
	}
	if rep.Refused != "" {
		return &exitError{code: 2, err: fmt.Errorf("model inspect %s: Temper refuses this directory: %s", dir, rep.Refused)}
	}
	return nil
}
