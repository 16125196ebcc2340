package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// Flags and values that several commands share.

// clientFlags are shared by every command that talks to a server.
type clientFlags struct {
	temporal  string
	namespace string
	ui        string
}

func (c *clientFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.temporal, "temporal", envOr("TEMPORAL_ADDRESS", defaultTemporal()), "Temporal frontend host:port (env TEMPORAL_ADDRESS; default: the running `temper dev`'s, else 127.0.0.1:7233)")
	fs.StringVar(&c.namespace, "namespace", envOr("TEMPORAL_NAMESPACE", workers.DefaultNamespace), "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&c.ui, "ui", os.Getenv("TEMPER_UI_URL"), "Web UI base URL used in printed links (env TEMPER_UI_URL; default: the one the `temper dev` serving --temporal runs, else http://127.0.0.1:8233)")
}

// defaultTemporal is the address of the `temper dev` running on $TEMPER_HOME, or the default port.
func defaultTemporal() string {
	if ds, ok := workers.ReadDevState(workers.Home()); ok {
		return ds.Temporal
	}
	return fmt.Sprintf("127.0.0.1:%d", workers.DefaultTemporalPort)
}

func (c *clientFlags) dial() (client.Client, error) {
	if !workers.Reachable(c.temporal) {
		return nil, fmt.Errorf("no Temporal server at %s: start one with `temper dev` (or pass --temporal HOST:PORT)", c.temporal)
	}
	return workers.Dial(c.temporal, c.namespace)
}

// uiBase is the Web UI base URL for links: --ui, else the UI of the `temper dev` serving c.temporal (""
// when it runs without one), else the default port.
func (c *clientFlags) uiBase() string {
	if c.ui != "" {
		return c.ui
	}
	if ds, ok := workers.ReadDevState(workers.Home()); ok && ds.Temporal == c.temporal {
		return ds.UI
	}
	return fmt.Sprintf("http://127.0.0.1:%d", workers.DefaultUIPort)
}

// runURL is the run's page in the Web UI, or a note when the server has no UI.
func (c *clientFlags) runURL(id string) string {
	base := c.uiBase()
	if base == "" {
		return "(no Web UI: the server runs with --ui-port -1)"
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimSuffix(base, "/"), c.namespace, id)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// multiFlag collects a repeatable flag (--set, --prompt).
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// startFlags are the flags of the commands that start a pipeline (run, fork); each words the help
// of --set, --wait, --json and --dry-run for itself.
type startFlags struct {
	cf                clientFlags
	sets              multiFlag
	id                string
	wait, asJSON, dry bool
}

// startHelp is a command's help of the startFlags it words for itself.
type startHelp struct{ set, wait, json, dry string }

func (s *startFlags) bind(fs *flag.FlagSet, h startHelp) {
	s.cf.bind(fs)
	fs.Var(&s.sets, "set", h.set)
	fs.StringVar(&s.id, "id", "", "workflow ID (default: NAME-UTCDATE-RANDOM)")
	fs.BoolVar(&s.wait, "wait", false, h.wait)
	fs.BoolVar(&s.asJSON, "json", false, h.json)
	fs.BoolVar(&s.dry, "dry-run", false, h.dry)
}

// dryRun prints in as JSON when --dry-run is set, and says whether it was.
func (s *startFlags) dryRun(in workflows.PipelineInput) bool {
	if s.dry {
		b, _ := json.MarshalIndent(in, "", "  ")
		fmt.Fprintln(stdout, string(b))
	}
	return s.dry
}

// start starts in under --id (default a new ID), prints its ID, the lines of note and its Web UI
// link, and with --wait follows it to its end.
func (s *startFlags) start(ctx context.Context, cl client.Client, in workflows.PipelineInput, note string) error {
	if s.id == "" {
		s.id = pipeline.NewRunID(in.Name)
	}
	run, err := pipeline.Start(ctx, cl, s.id, in)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run     %s\n%sweb ui  %s\n", run.GetID(), note, s.cf.runURL(run.GetID()))
	if !s.wait {
		return nil
	}
	return report.Follow(ctx, cl, run, os.Stderr, stdout, s.asJSON)
}

// workerFlags are the flags of the workers of `temper worker` and of the embedded stacks.
type workerFlags struct{ metrics, budget string }

func (f *workerFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics (the Temporal SDK's and Temper's) on this address, e.g. :9090 (path /metrics)")
	fs.StringVar(&f.budget, "memory-budget", "", memoryBudgetUsage)
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

// options are the workers' options the flags ask for, with the metrics server started when
// --metrics names an address (Metrics.Close stops it; nil when not).
func (f *workerFlags) options() (workers.Options, error) {
	budget, err := parseMemoryBudget(f.budget)
	if err != nil {
		return workers.Options{}, err
	}
	o := workers.Options{Engine: workers.EngineOptions{MemoryBudget: budget}}
	if f.metrics != "" {
		if o.Metrics, err = workers.StartMetrics(f.metrics); err != nil {
			return o, usageErr("--metrics: %v", err)
		}
	}
	return o, nil
}

// engineFlags choose the engine of the commands that run a model in-process (generate, serve).
type engineFlags struct{ executor, backend, plugin string }

func (f *engineFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.executor, "executor", tpu.ExecutorSequential, "Go backend executor: sequential or parallel")
	fs.StringVar(&f.backend, "backend", "", "compute backend: go, or xla (a binary built with -tags xla, and a PJRT plugin); default go, or xla when --plugin is set")
	fs.StringVar(&f.plugin, "plugin", "", "PJRT plugin of --backend xla: cpu (default), cuda, tpu, or the path of a plugin .so")
}

// options are the engine's options the flags ask for (tpu.ResolveBackend's backend and plugin).
func (f *engineFlags) options() workers.EngineOptions {
	o := workers.EngineOptions{Executor: f.executor}
	o.Backend, o.Plugin = tpu.ResolveBackend(f.backend, f.plugin)
	return o
}
