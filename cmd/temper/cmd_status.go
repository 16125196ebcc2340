package main

import (
	"context"
	"errors"
	"flag"
	"os"

	"github.com/temperml/temper/internal/report"
)

func init() {
	register(&command{name: "status", summary: "describe a run (default: the newest): status, current phase and step, results",
		usage: "[RUN]", flags: flagsOf[statusCmd]()})
}

type statusCmd struct {
	cf     clientFlags
	wait   bool
	asJSON bool
}

func (c *statusCmd) bind(fs *flag.FlagSet) {
	c.cf.bind(fs)
	fs.BoolVar(&c.wait, "wait", false, "follow the run to its end")
	fs.BoolVar(&c.asJSON, "json", false, "print JSON")
}

func (c *statusCmd) run(ctx context.Context, args []string) error {
	cl, err := c.cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	id := ""
	if len(args) > 0 {
		id = args[0]
	} else {
		runs, err := report.Runs(ctx, cl, 1)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			return errors.New("no runs yet: start one with `temper run PIPELINE.yaml` or `temper demo`")
		}
		id = runs[0].ID
	}
	if c.wait {
		return report.Follow(ctx, cl, cl.GetWorkflow(ctx, id, ""), os.Stderr, stdout, c.asJSON)
	}
	return report.WriteStatus(ctx, cl, stdout, id, c.cf.runURL, c.asJSON)
}
