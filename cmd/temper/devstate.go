package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/temperml/temper/workers"
)

// devState is what a running `temper dev` or `temper demo` leaves in HOME/dev.json: the address its
// embedded server listens on and its Web UI's base URL. Client commands read it so that, without
// --temporal or --ui, they reach the server that is actually running and print links to the UI port it
// actually serves (not the default ports).
type devState struct {
	Temporal string `json:"temporal"`
	UI       string `json:"ui"` // "" when the server runs without a UI
	PID      int    `json:"pid"`
}

func devStatePath(home string) string { return filepath.Join(home, "dev.json") }

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

func writeDevState(home string, st *workers.Stack) (string, error) {
	b, _ := json.Marshal(devState{Temporal: st.Address, UI: st.UIURL, PID: os.Getpid()})
	p := devStatePath(home)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

// readDevState returns the state of a `temper dev` running on HOME, if its server still answers (a
// dev.json left by a killed process is ignored).
func readDevState(home string) (devState, bool) {
	var ds devState
	b, err := os.ReadFile(devStatePath(home))
	if err != nil || json.Unmarshal(b, &ds) != nil || ds.Temporal == "" || !workers.Reachable(ds.Temporal) {
		return devState{}, false
	}
	return ds, true
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
