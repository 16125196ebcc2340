package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers"
)

//go:embed demo.yaml
var demoPipeline []byte

func init() {
	register(&command{name: "demo", summary: "run the built-in demo pipeline on the embedded stack (started if none runs) and print its result",
		flags: flagsOf[demoCmd]()})
}

type demoCmd struct {
	stackFlags
	asJSON bool
	keep   bool
	sets   multiFlag
}

func (c *demoCmd) bind(fs *flag.FlagSet) {
	c.stackFlags.bind(fs, "demo")
	fs.BoolVar(&c.asJSON, "json", false, "end with one JSON line: run ID, elapsed seconds, per-phase results")
	fs.BoolVar(&c.keep, "keep", false, "keep the embedded server and Web UI up after the run until Ctrl-C")
	fs.Var(&c.sets, "set", "override a field of the demo pipeline: key.path=value (repeatable)")
}

func (c *demoCmd) run(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErr("demo takes no arguments, got %q", args)
	}
	in, err := pipeline.Parse("demo.yaml", demoPipeline, c.sets, c.home)
	if err != nil {
		return err
	}
	st, err := c.startDemoStack()
	if err != nil {
		return err
	}
	defer st.Close()
	ui := st.UIURL
	if st.Server == nil {
		// Attached to a running `temper dev`: link to the UI it serves, if any.
		if ds, ok := workers.ReadDevState(c.home); ok && ds.Temporal == st.Address {
			ui = ds.UI
		}
	}
	cf := clientFlags{temporal: st.Address, namespace: workers.DefaultNamespace, ui: ui}
	run, err := pipeline.Start(ctx, st.Client, pipeline.NewRunID(in.Name), in)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "run     %s\nweb ui  %s\n", run.GetID(), cf.runURL(run.GetID()))
	if err := report.Follow(ctx, st.Client, run, os.Stderr, stdout, c.asJSON); err != nil {
		return err
	}
	if !c.asJSON {
		fmt.Fprintf(stdout, "web ui  %s\n", cf.runURL(run.GetID()))
	}
	if c.keep && st.Server != nil {
		fmt.Fprintf(os.Stderr, "serving %s until Ctrl-C\n", ui)
		<-ctx.Done()
	}
	return nil
}

// startDemoStack joins the server already running on the demo's address (a `temper dev`), or serves
// one; another demo's server (which stops when that demo ends) is never joined: this one then serves
// on free ports.
func (c *demoCmd) startDemoStack() (*devStack, error) {
	if err := c.prepare(os.Stderr); err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("%s:%d", c.ip, c.port)
	if c.temporal == "" && workers.Reachable(addr) {
		if !c.pinnedPorts() && workers.StackKindAt(addr, workers.DefaultNamespace) == "demo" {
			fmt.Fprintf(os.Stderr, "%s is another temper demo's server (it stops when that demo ends): serving this one on free ports\n", addr)
			c.freePorts()
		} else {
			// A `temper dev` (or another server) is already up: use it; our workers join its own.
			c.temporal = addr
			fmt.Fprintf(os.Stderr, "using the Temporal server already running at %s\n", addr)
		}
	}
	st, err := c.start(os.Stderr)
	if err != nil && c.temporal == "" && !c.pinnedPorts() && strings.Contains(err.Error(), "already in use") {
		// Another demo found the default port free in the same instant and bound it first:
		// serve this one on free ports rather than fail.
		fmt.Fprintf(os.Stderr, "%s was taken while the server started (another temper demo?): serving on free ports\n", addr)
		c.freePorts()
		st, err = c.start(os.Stderr)
	}
	return st, err
}
