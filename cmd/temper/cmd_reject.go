package main

import (
	"context"
	"flag"

	"github.com/temperml/temper/workflows"
)

func init() {
	register(&command{name: "reject", summary: "reject the gate a run waits at: the pipeline stops there, its result says who and why",
		usage: "RUN", flags: flagsOf[rejectCmd]()})
}

type rejectCmd struct{ sf steerFlags }

func (c *rejectCmd) bind(fs *flag.FlagSet) { c.sf.bind(fs) }

func (c *rejectCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("usage: temper reject RUN [--note TEXT] (runs waiting: temper ls --waiting)")
	}
	return c.sf.send(ctx, args[0], workflows.UpdateReject, workflows.SteerRequest{})
}
