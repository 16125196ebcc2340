package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/internal/datagen"
)

func init() {
	register(&command{name: "data", summary: "datasets: `data gen TASK` writes a built-in task as JSONL; `data check FILE` validates one",
		usage: "gen TASK | check FILE.jsonl | tasks", subs: []string{"gen", "check", "tasks"}, flags: flagsOf[dataCmd]()})
}

type dataCmd struct{ datagen.Options }

func (c *dataCmd) bind(fs *flag.FlagSet) {
	fs.IntVar(&c.N, "n", 1000, "examples to generate")
	fs.IntVar(&c.Heldout, "heldout", 0, "also write this many held-out examples (disjoint prompts) to OUT with .heldout before the extension")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed: same seed, same data")
	fs.StringVar(&c.Out, "out", "", "output file (default: stdout)")
	fs.BoolVar(&c.Text, "text", false, "write pretraining lines {\"text\": prompt+completion} instead of prompt/completion")
	fs.BoolVar(&c.Pairs, "pairs", false, "write preference pairs {prompt, chosen, rejected}: the correct answer against a plausible mistake")
	fs.BoolVar(&c.KTO, "kto", false, "with --pairs: write KTO's unpaired form {prompt, completion, label}")
	fs.StringVar(&c.From, "from", "", "with --pairs: pair verified-correct and incorrect samples of this checkpoint (URI or directory) instead of synthetic mistakes")
	fs.IntVar(&c.Samples, "samples", 8, "with --from: completions sampled per prompt")
	fs.BoolVar(&c.Chat, "chat", false, "pose each example as a chat (the prompt as the user's message, the completion as the assistant's), as agentic episodes are; with --text, write the rendered conversation as text; held-out prompts are rendered up to the assistant's turn")
	fs.IntVar(&c.Pack, "pack", 1, "with --text: examples per text line")
	fs.BoolVar(&c.Tools, "tools", false, "agentic task (bigmul, facts, route, add2check, addcheck): write tool-use demonstrations (multi-turn messages: user, assistant calling its tools, their results, assistant answer); held-out stays prompt/completion")
}

func (c *dataCmd) run(ctx context.Context, args []string) error {
	c.Stdout, c.Log = stdout, os.Stderr
	if len(args) == 0 {
		return usageErr("usage: temper data gen TASK | data check FILE | data tasks")
	}
	switch args[0] {
	case "tasks":
		for _, name := range tasks.Names() {
			t, _ := tasks.Lookup(name)
			fmt.Fprintf(stdout, "  %-8s %s\n", name, t.Doc())
		}
		return nil
	case "check":
		if len(args) != 2 {
			return usageErr("usage: temper data check FILE.jsonl")
		}
		return datagen.Check(args[1], stdout)
	case "gen":
		if len(args) != 2 {
			return usageErr("usage: temper data gen TASK (tasks: `temper data tasks`)")
		}
		return datagen.Gen(ctx, args[1], c.Options)
	}
	return usageErr("unknown data command %q (gen, check, tasks)", args[0])
}
