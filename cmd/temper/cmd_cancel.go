package main

import (
	"context"
	"flag"
	"fmt"
)

func init() {
	register(&command{name: "cancel", summary: "cancel a run: its phase workflows and running activities are cancelled; committed checkpoints stay",
		usage: "RUN [RUN...]", flags: flagsOf[cancelCmd]()})
}

type cancelCmd struct{ cf clientFlags }

func (c *cancelCmd) bind(fs *flag.FlagSet) { c.cf.bind(fs) }

func (c *cancelCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("usage: temper cancel RUN [RUN...] (run IDs from `temper ls`)")
	}
	cl, err := c.cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, id := range args {
		if err := cl.CancelWorkflow(ctx, id, ""); err != nil {
			return fmt.Errorf("cancel %s: %w", id, err)
		}
		fmt.Fprintf(stdout, "%s: cancellation requested\n", id)
	}
	return nil
}
