package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "generate", summary: "generate text from a model directory (config.json + model.safetensors), e.g. one `temper ckpt export` wrote",
		usage: "MODEL_DIR", flags: flagsOf[generateCmd]()})
}

type generateCmd struct {
	prompts      multiFlag
	maxNew, topK int
	temp, topP   float64
	seed         uint64
	bos          bool
	engine       engineFlags
}

func (c *generateCmd) bind(fs *flag.FlagSet) {
	fs.Var(&c.prompts, "prompt", "prompt text (repeatable: prompts are generated as one batch)")
	fs.IntVar(&c.maxNew, "max-new-tokens", 32, "tokens to generate per prompt")
	fs.Float64Var(&c.temp, "temperature", 0, "0 = greedy")
	fs.IntVar(&c.topK, "top-k", 0, "keep the k most likely tokens (0: off)")
	fs.Float64Var(&c.topP, "top-p", 0, "nucleus sampling mass (0: off)")
	fs.Uint64Var(&c.seed, "seed", 1, "sampling seed: same seed, same text")
	fs.BoolVar(&c.bos, "bos", true, "prepend BOS (models trained by temper expect it)")
	c.engine.bind(fs)
}

func (c *generateCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 || len(c.prompts) == 0 {
		return usageErr("usage: temper generate MODEL_DIR --prompt TEXT [--prompt TEXT ...]")
	}
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	m, err := train.Loader{Ckpt: cl, NewEngine: workers.NewTrainEngine(c.engine.options())}.Load(ctx, args[0], train.LoadOptions{})
	if err != nil {
		return err
	}
	rt := m.Engine
	defer rt.Close()
	// The model's own tokenizer when the directory has one (BOS as its add_bos_token says), else
	// bytes (BOS as --bos says).
	enc, err := train.EncoderOf(m, train.ChatSpec{})
	if err != nil {
		return err
	}
	tok, bos := enc.Tok, c.bos
	if _, byteLevel := tok.(tokenize.Byte); !byteLevel {
		bos = enc.BOS
	}
	stops := train.Stops(enc, m.Generation)
	ids := make([][]int, len(c.prompts))
	for i, p := range c.prompts {
		if bos && tok.Special().BOS >= 0 {
			ids[i] = append(ids[i], tok.Special().BOS)
		}
		ids[i] = append(ids[i], tok.Encode(p)...)
	}
	opts := sample.Options{MaxNewTokens: c.maxNew, Temperature: c.temp, TopK: c.topK, TopP: c.topP, Seed: c.seed, StopTokens: stops}
	outs, err := rt.Generate(ids, opts)
	if err != nil {
		return err
	}
	for i, o := range outs {
		fmt.Fprintf(stdout, "%s%s\t[%s]\n", c.prompts[i], tok.Decode(train.StripStops(o.Tokens, stops)), o.StopReason)
	}
	return nil
}
