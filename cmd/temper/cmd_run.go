package main

import (
	"context"
	"flag"

	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "run", summary: "validate a pipeline (YAML/JSON) and start it; --wait follows it to the end",
		usage: "PIPELINE.yaml", flags: flagsOf[runCmd]()})
}

type runCmd struct {
	startFlags
	home string
}

func (c *runCmd) bind(fs *flag.FlagSet) {
	c.startFlags.bind(fs, startHelp{set: "override a field: key.path=value (repeatable; list elements by index or name)",
		wait: "follow the run with a progress bar and print its result",
		json: "with --wait, end with one JSON line: run ID, elapsed seconds, per-phase results",
		dry:  "validate and print the workflow input JSON; start nothing"})
	fs.StringVar(&c.home, "home", workers.Home(), "state directory; the default store is HOME/store")
}

func (c *runCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("run wants one pipeline file, got %d arguments", len(args))
	}
	in, err := pipeline.Load(args[0], c.sets, c.home)
	if err != nil {
		return err
	}
	if c.dryRun(in) {
		return nil
	}
	cl, err := c.cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	return c.start(ctx, cl, in, "")
}
