package main

import (
	"context"
	"flag"

	"github.com/temperml/temper/workflows"
)

func init() {
	register(&command{name: "pause", summary: "pause a run's running phase at its next boundary, once its checkpoint is committed; it holds no worker while paused",
		usage: "RUN", flags: flagsOf[pauseCmd]()})
}

type pauseCmd struct{ sf steerFlags }

func (c *pauseCmd) bind(fs *flag.FlagSet) { c.sf.bind(fs) }

func (c *pauseCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("usage: temper pause RUN [--note TEXT]")
	}
	return c.sf.send(ctx, args[0], workflows.UpdatePause, workflows.SteerRequest{})
}
