package main

import (
	"context"
	"flag"
)

func init() {
	register(&command{name: "dev", summary: "run the embedded Temporal server, Web UI and workers for every role until Ctrl-C",
		flags: flagsOf[devCmd]()})
}

// devCmd serves the embedded stack (stackFlags.serve).
type devCmd struct{ stackFlags }

func (c *devCmd) bind(fs *flag.FlagSet) { c.stackFlags.bind(fs, "dev") }

func (c *devCmd) run(ctx context.Context, args []string) error { return c.serve(ctx, args) }
