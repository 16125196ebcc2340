package main

import (
	"fmt"
	"io"
	"net"
	"os"

	"github.com/temperml/temper/workers"
)

// devStack is a Stack whose Close also removes the dev.json it wrote.
type devStack struct {
	*workers.Stack
	statePath string
	metrics   *workers.Metrics // nil without --metrics
}

func (d *devStack) Close() {
	if d.statePath != "" {
		os.Remove(d.statePath)
	}
	d.Stack.Close()
	d.metrics.Close()
}

// isLoopback reports whether host names this machine's loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// applyTemporalEnv decides what `temper dev`/`temper demo` do with an exported TEMPORAL_ADDRESS (which
// Temporal CLI users keep in their shell). They serve; they attach to another server only when asked
// with --temporal. A loopback TEMPORAL_ADDRESS is where this user's clients look for a server, so the
// embedded server listens there (unless --port or --ip say otherwise); any other address is ignored,
// and both cases are said on w.
func (s *stackFlags) applyTemporalEnv(w io.Writer, explicit map[string]bool) error {
	env := os.Getenv("TEMPORAL_ADDRESS")
	if env == "" || explicit["temporal"] {
		return nil
	}
	host, port, err := net.SplitHostPort(env)
	var p int
	if err == nil {
		_, err = fmt.Sscanf(port, "%d", &p)
	}
	if err != nil || p <= 0 || p > 65535 {
		return usageErr("TEMPORAL_ADDRESS=%q: want host:port", env)
	}
	if isLoopback(host) && !explicit["port"] && !explicit["ip"] {
		s.port = p
		if host != "localhost" {
			s.ip = host
		}
		fmt.Fprintf(w, "TEMPORAL_ADDRESS=%s: serving the embedded Temporal server there (use --temporal %s to attach to a server already running there instead)\n", env, env)
		return nil
	}
	fmt.Fprintf(w, "TEMPORAL_ADDRESS=%s ignored: temper %s serves its own Temporal server on %s:%d (use --temporal %s to attach to that server instead)\n",
		env, s.command, s.ip, s.port, env)
	return nil
}
