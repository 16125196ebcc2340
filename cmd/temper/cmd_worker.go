package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "worker", summary: "run workers for the given roles against a Temporal server (cluster mode)",
		flags: flagsOf[workerCmd]()})
}

type workerCmd struct {
	cf           clientFlags
	roles        string
	slots        int
	rolloutSlots int
	workerFlags
}

func (c *workerCmd) bind(fs *flag.FlagSet) {
	c.cf.bind(fs)
	fs.StringVar(&c.roles, "roles", "all", "worker roles: temper,trainer,rollout,reward or all")
	fs.IntVar(&c.slots, "trainer-slots", 1, "concurrent trainer activities (one per accelerator)")
	fs.IntVar(&c.rolloutSlots, "rollout-slots", 1, "concurrent rollout activities (one shard at a time per accelerator)")
	c.workerFlags.bind(fs)
}

func (c *workerCmd) run(ctx context.Context, args []string) error {
	rs, err := workers.ParseRoles(c.roles)
	if err != nil {
		return usageErr("--roles: %v", err)
	}
	if len(args) > 0 {
		return usageErr("worker takes no arguments, got %q", args)
	}
	wo, err := c.options()
	if err != nil {
		return err
	}
	m := wo.Metrics
	defer m.Close()
	wo.TrainerSlots, wo.RolloutSlots = c.slots, c.rolloutSlots
	st, err := workers.StartStack(workers.StackOptions{Temporal: c.cf.temporal, Namespace: c.cf.namespace, Roles: rs, Workers: wo})
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(stdout, "workers %s polling %s (namespace %s); Ctrl-C stops\n", strings.Join(rs, ","), c.cf.temporal, c.cf.namespace)
	if m != nil {
		fmt.Fprintf(stdout, "metrics http://%s/metrics\n", m.Addr)
	}
	<-ctx.Done()
	return nil
}
