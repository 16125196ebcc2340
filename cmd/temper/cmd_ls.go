package main

import (
	"context"
	"flag"

	"github.com/temperml/temper/internal/report"
)

func init() {
	register(&command{name: "ls", summary: "list pipeline runs, newest first; --kind/--where list the pipelines and phases a visibility query finds, --waiting what waits for a person",
		flags: flagsOf[lsCmd]()})
}

type lsCmd struct {
	cf      clientFlags
	n       int
	kind    string
	where   string
	waiting bool
}

func (c *lsCmd) bind(fs *flag.FlagSet) {
	c.cf.bind(fs)
	fs.IntVar(&c.n, "n", 20, "how many runs")
	fs.StringVar(&c.kind, "kind", "", "only workflows of this kind (a phase kind such as grpo, or pipeline): TemperKind = 'KIND'")
	fs.StringVar(&c.where, "where", "", "a visibility query on Temper's search attributes, e.g. 'TemperExactMatch > 0.5' (TemperRun, TemperPhase, TemperKind, TemperStep, TemperExactMatch, TemperRewardMean, TemperBacktrack, TemperWaiting, TemperParent)")
	fs.BoolVar(&c.waiting, "waiting", false, "list what waits for a person: runs at an approval gate (temper approve) and paused phases (temper resume)")
}

func (c *lsCmd) run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErr("ls takes no arguments, got %q (filter with --kind and --where)", args)
	}
	query, err := report.SearchQuery(c.kind, c.where, c.waiting)
	if err != nil {
		return err
	}
	cl, err := c.cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	if query != "" {
		rows, err := report.Search(ctx, cl, c.cf.namespace, query, c.n)
		if err != nil {
			return err
		}
		if c.waiting {
			report.WriteWaiting(stdout, rows)
			return nil
		}
		report.WriteSearch(stdout, rows)
		return nil
	}
	runs, err := report.Runs(ctx, cl, c.n)
	if err != nil {
		return err
	}
	report.WriteRuns(stdout, runs)
	return nil
}
