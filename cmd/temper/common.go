package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/workers"
)

// clientFlags are shared by every command that talks to a server.
type clientFlags struct {
	temporal  string
	namespace string
	ui        string
}

func (c *clientFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.temporal, "temporal", envOr("TEMPORAL_ADDRESS", fmt.Sprintf("127.0.0.1:%d", workers.DefaultTemporalPort)), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&c.namespace, "namespace", envOr("TEMPORAL_NAMESPACE", workers.DefaultNamespace), "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&c.ui, "ui", envOr("TEMPER_UI_URL", fmt.Sprintf("http://127.0.0.1:%d", workers.DefaultUIPort)), "Web UI base URL used in printed links (env TEMPER_UI_URL)")
}

func (c *clientFlags) dial() (client.Client, error) {
	if !workers.Reachable(c.temporal) {
		return nil, fmt.Errorf("no Temporal server at %s: start one with `temper dev` (or pass --temporal HOST:PORT)", c.temporal)
	}
	return workers.Dial(c.temporal, c.namespace)
}

func (c *clientFlags) runURL(id string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimSuffix(c.ui, "/"), c.namespace, id)
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
