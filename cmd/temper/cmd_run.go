package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "run", summary: "validate a pipeline (YAML/JSON) and start it; --wait follows it to the end",
		usage: "PIPELINE.yaml", flags: flagsOf[runCmd]()})
}

type runCmd struct {
	cf     clientFlags
	sets   multiFlag
	wait   bool
	asJSON bool
	id     string
	home   string
	dry    bool
}

func (c *runCmd) bind(fs *flag.FlagSet) {
	c.cf.bind(fs)
	fs.Var(&c.sets, "set", "override a field: key.path=value (repeatable; list elements by index or name)")
	fs.BoolVar(&c.wait, "wait", false, "follow the run with a progress bar and print its result")
	fs.BoolVar(&c.asJSON, "json", false, "with --wait, end with one JSON line: run ID, elapsed seconds, per-phase results")
	fs.StringVar(&c.id, "id", "", "workflow ID (default: NAME-UTCDATE-RANDOM)")
	fs.StringVar(&c.home, "home", workers.Home(), "state directory; the default store is HOME/store")
	fs.BoolVar(&c.dry, "dry-run", false, "validate and print the workflow input JSON; start nothing")
}

func (c *runCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("run wants one pipeline file, got %d arguments", len(args))
	}
	in, err := loadPipeline(args[0], c.sets, c.home)
	if err != nil {
		return err
	}
	if c.dry {
		b, _ := json.MarshalIndent(in, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	cl, err := c.cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	if c.id == "" {
		c.id = newRunID(in.Name)
	}
	run, err := startPipeline(ctx, cl, c.id, in)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run     %s\nweb ui  %s\n", run.GetID(), c.cf.runURL(run.GetID()))
	if !c.wait {
		return nil
	}
	return report.Follow(ctx, cl, run, os.Stderr, stdout, c.asJSON)
}
