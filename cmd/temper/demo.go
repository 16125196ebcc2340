package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/temperml/temper/workers"
)

//go:embed demo.yaml
var demoPipeline []byte

func init() {
	register(&command{
		name:    "demo",
		summary: "run the built-in demo pipeline on the embedded stack (started if none runs) and print its result",
		flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			var s stackFlags
			s.bind(fs, "demo")
			asJSON := fs.Bool("json", false, "end with one JSON line: run ID, elapsed seconds, per-phase results")
			keep := fs.Bool("keep", false, "keep the embedded server and Web UI up after the run until Ctrl-C")
			var sets multiFlag
			fs.Var(&sets, "set", "override a field of the demo pipeline: key.path=value (repeatable)")
			return func(ctx context.Context, args []string) error {
				if len(args) > 0 {
					return usageErr("demo takes no arguments, got %q", args)
				}
				in, err := parsePipeline("demo.yaml", demoPipeline, sets, s.home)
				if err != nil {
					return err
				}
				if err := s.prepare(os.Stderr); err != nil {
					return err
				}
				addr := fmt.Sprintf("%s:%d", s.ip, s.port)
				if s.temporal == "" && workers.Reachable(addr) {
					if !s.pinnedPorts() && workers.StackKindAt(addr, workers.DefaultNamespace) == "demo" {
						// Another demo's server: it stops when that demo ends, taking this run with it.
						fmt.Fprintf(os.Stderr, "%s is another temper demo's server (it stops when that demo ends): serving this one on free ports\n", addr)
						s.freePorts()
					} else {
						// A `temper dev` (or another server) is already up: use it; our workers join its own.
						s.temporal = addr
						fmt.Fprintf(os.Stderr, "using the Temporal server already running at %s\n", addr)
					}
				}
				st, err := s.start(os.Stderr)
				if err != nil && s.temporal == "" && !s.pinnedPorts() && strings.Contains(err.Error(), "already in use") {
					// Another demo found the default port free in the same instant and bound it first:
					// serve this one on free ports rather than fail.
					fmt.Fprintf(os.Stderr, "%s was taken while the server started (another temper demo?): serving on free ports\n", addr)
					s.freePorts()
					st, err = s.start(os.Stderr)
				}
				if err != nil {
					return err
				}
				defer st.Close()
				ui := st.UIURL
				if st.Server == nil {
					// Attached to a running `temper dev`: link to the UI it serves, if any.
					if ds, ok := readDevState(s.home); ok && ds.Temporal == st.Address {
						ui = ds.UI
					}
				}
				cf := clientFlags{temporal: st.Address, namespace: workers.DefaultNamespace, ui: ui}
				run, err := startPipeline(ctx, st.Client, newRunID(in.Name), in)
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "run     %s\nweb ui  %s\n", run.GetID(), cf.runURL(run.GetID()))
				if err := follow(ctx, st.Client, run, os.Stderr, *asJSON); err != nil {
					return err
				}
				if !*asJSON {
					fmt.Fprintf(stdout, "web ui  %s\n", cf.runURL(run.GetID()))
				}
				if *keep && st.Server != nil {
					fmt.Fprintf(os.Stderr, "serving %s until Ctrl-C\n", ui)
					<-ctx.Done()
				}
				return nil
			}
		},
	})
}
