package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/temperml/temper/algorithms/hf"
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
	metrics      string
	memoryBudget string
}

func (c *workerCmd) bind(fs *flag.FlagSet) {
	c.cf.bind(fs)
	fs.StringVar(&c.roles, "roles", "all", "worker roles: temper,trainer,rollout,reward or all")
	fs.IntVar(&c.slots, "trainer-slots", 1, "concurrent trainer activities (one per accelerator)")
	fs.IntVar(&c.rolloutSlots, "rollout-slots", 1, "concurrent rollout activities (one shard at a time per accelerator)")
	fs.StringVar(&c.memoryBudget, "memory-budget", "", memoryBudgetUsage)
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics (the Temporal SDK's and Temper's) on this address, e.g. :9090 (path /metrics)")
}

// memoryBudgetUsage documents --memory-budget of `temper worker` and the embedded stacks.
const memoryBudgetUsage = "trainer and rollout engines: a training step whose estimated intermediate memory (activations) exceeds this many bytes (or 6GB, 500MB: decimal units) recomputes activations per layer (model.remat: layer) unless the model sets remat; empty or 0: no budget"

// parseMemoryBudget reads --memory-budget.
func parseMemoryBudget(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := hf.ParseSize(s)
	if err != nil || n < 0 {
		return 0, usageErr("--memory-budget %q: want bytes, or a number with TB, GB, MB or KB (e.g. 6GB); 0: none", s)
	}
	return n, nil
}

func (c *workerCmd) run(ctx context.Context, args []string) error {
	rs, err := workers.ParseRoles(c.roles)
	if err != nil {
		return usageErr("--roles: %v", err)
	}
	if len(args) > 0 {
		return usageErr("worker takes no arguments, got %q", args)
	}
	budget, err := parseMemoryBudget(c.memoryBudget)
	if err != nil {
		return err
	}
	var m *workers.Metrics
	if c.metrics != "" {
		if m, err = workers.StartMetrics(c.metrics); err != nil {
			return usageErr("--metrics: %v", err)
		}
		defer m.Close()
	}
	st, err := workers.StartStack(workers.StackOptions{Temporal: c.cf.temporal, Namespace: c.cf.namespace, Roles: rs,
		Workers: workers.Options{TrainerSlots: c.slots, RolloutSlots: c.rolloutSlots, Metrics: m,
			Engine: workers.EngineOptions{MemoryBudget: budget}}})
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
