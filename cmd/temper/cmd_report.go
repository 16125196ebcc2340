package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/temperml/temper/internal/report"
)

func init() {
	register(&command{name: "report", summary: "write a run's report: one self-contained HTML page plus PNG plots of every phase's curves",
		usage: "RUN", flags: flagsOf[reportCmd]()})
}

type reportCmd struct {
	cf    clientFlags
	out   string
	store string
}

func (c *reportCmd) bind(fs *flag.FlagSet) {
	c.cf.bind(fs)
	fs.StringVar(&c.out, "out", "", "directory to write index.html and the PNGs into (default: report-RUN)")
	fs.StringVar(&c.store, "store", "", "the run's store (default: the one in the run's input, else $TEMPER_HOME/store)")
}

func (c *reportCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("usage: temper report RUN [--out DIR]")
	}
	id := args[0]
	if c.out == "" {
		c.out = "report-" + id
	}
	cl, err := c.cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	d, err := report.Gather(ctx, cl, id, c.store)
	var se *report.StoreError
	if errors.As(err, &se) {
		return &exitError{code: 2, err: err}
	}
	if err != nil {
		return err
	}
	files, err := report.Write(d, c.out)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(stdout, f)
	}
	return nil
}
