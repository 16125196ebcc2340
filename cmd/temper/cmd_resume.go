package main

import (
	"context"
	"flag"

	"github.com/temperml/temper/workflows"
)

func init() {
	register(&command{name: "resume", summary: "resume a paused run where it stopped (or withdraw a pause it has not reached)",
		usage: "RUN", flags: flagsOf[resumeCmd]()})
}

type resumeCmd struct{ sf steerFlags }

func (c *resumeCmd) bind(fs *flag.FlagSet) { c.sf.bind(fs) }

func (c *resumeCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("usage: temper resume RUN [--note TEXT]")
	}
	return c.sf.send(ctx, args[0], workflows.UpdateResume, workflows.SteerRequest{})
}
