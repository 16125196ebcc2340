package main

import (
	"context"
	"flag"
)

func init() {
	register(&command{name: "server", summary: "run only the embedded Temporal server (headless: no workers, no Web UI unless --ui-port) until Ctrl-C",
		flags: flagsOf[serverCmd]()})
}

// serverCmd is `temper dev` without workers or Web UI unless asked for: cluster mode's server.
type serverCmd struct{ stackFlags }

func (c *serverCmd) bind(fs *flag.FlagSet) {
	c.stackFlags.bind(fs, "server")
	c.roles, c.uiPort = "none", -1
	fs.Lookup("roles").DefValue, fs.Lookup("ui-port").DefValue = "none", "-1"
}

func (c *serverCmd) run(ctx context.Context, args []string) error { return c.serve(ctx, args) }
