package main

import (
	"context"
	"flag"

	"github.com/temperml/temper/workflows"
)

func init() {
	register(&command{name: "approve", summary: "approve the gate a run waits at (gate: {require: approval}): its next phase starts",
		usage: "RUN", flags: flagsOf[approveCmd]()})
}

type approveCmd struct{ sf steerFlags }

func (c *approveCmd) bind(fs *flag.FlagSet) { c.sf.bind(fs) }

func (c *approveCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("usage: temper approve RUN [--note TEXT] (runs waiting: temper ls --waiting)")
	}
	return c.sf.send(ctx, args[0], workflows.UpdateApprove, workflows.SteerRequest{})
}
