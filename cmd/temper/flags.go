package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers"
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

func defaultStore(home string) string {
	abs, err := filepath.Abs(filepath.Join(home, "store"))
	if err != nil {
		abs = filepath.Join(home, "store")
	}
	return "file://" + abs
}

// multiFlag collects a repeatable flag (--set, --prompt).
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// backendFlags resolves --backend and --plugin: the backend is go unless xla is asked for or a
// plugin is named; xla without a plugin means the CPU plugin, so that a missing plugin is reported
// as such (with what to install) rather than as a missing flag.
func backendFlags(backend, plugin string) (string, string) {
	if backend == "" {
		backend = tpu.BackendGo
		if plugin != "" {
			backend = tpu.BackendXLA
		}
	}
	if backend == tpu.BackendXLA && plugin == "" {
		plugin = "cpu"
	}
	return backend, plugin
}
