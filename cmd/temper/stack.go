package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/devserver"
)

// stackFlags configure the embedded stack of `temper dev`, `temper server` and `temper demo`.
type stackFlags struct {
	command  string // "dev" or "demo", for messages
	fs       *flag.FlagSet
	home     string
	temporal string
	ip       string
	port     int
	uiPort   int
	roles    string
	verbose  bool
	db       string
	prepared bool
	workerFlags
}

func (s *stackFlags) bind(fs *flag.FlagSet, command string) {
	s.fs, s.command = fs, command
	fs.StringVar(&s.home, "home", workers.Home(), "state directory: SQLite file, local store (env TEMPER_HOME)")
	fs.StringVar(&s.temporal, "temporal", "", "attach to this Temporal server (host:port) instead of starting one; an exported TEMPORAL_ADDRESS is not used for this (a loopback one is where the embedded server listens)")
	fs.StringVar(&s.ip, "ip", "127.0.0.1", "address the embedded server and UI bind to")
	fs.IntVar(&s.port, "port", workers.DefaultTemporalPort, "embedded Temporal gRPC port (default: TEMPORAL_ADDRESS's port when it is a loopback address)")
	fs.IntVar(&s.uiPort, "ui-port", workers.DefaultUIPort, "embedded Web UI port (-1: no UI)")
	fs.StringVar(&s.roles, "roles", "all", "worker roles to run: temper,trainer,rollout,reward, all, or none (server and UI only: cluster mode, where temper worker processes do the work)")
	fs.BoolVar(&s.verbose, "v", false, "show the embedded server's warnings")
	s.workerFlags.bind(fs)
	fs.StringVar(&s.db, "db", "", "keep the embedded server's state in PostgreSQL (postgres://user:password@host:port/database; its databases and schema are set up at start; scripts/postgres.sh starts one) instead of the SQLite file in --home")
}

// prepare applies TEMPORAL_ADDRESS (see applyTemporalEnv) once, saying what it does on w.
func (s *stackFlags) prepare(w io.Writer) error {
	if s.prepared {
		return nil
	}
	s.prepared = true
	explicit := map[string]bool{}
	if s.fs != nil {
		s.fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	}
	return s.applyTemporalEnv(w, explicit)
}

// pinnedPorts reports whether the user chose the server's ports (--port, --ui-port, or a loopback
// TEMPORAL_ADDRESS, which applyTemporalEnv turns into the port), so they must not be changed.
func (s *stackFlags) pinnedPorts() bool {
	pinned := os.Getenv("TEMPORAL_ADDRESS") != ""
	if s.fs != nil {
		s.fs.Visit(func(f *flag.Flag) { pinned = pinned || f.Name == "port" || f.Name == "ui-port" })
	}
	return pinned
}

// freePorts lets the embedded server pick free ports (the UI's too, unless it is off).
func (s *stackFlags) freePorts() {
	s.port = 0
	if s.uiPort >= 0 {
		s.uiPort = 0
	}
}

func (s *stackFlags) start(w io.Writer) (*devStack, error) {
	roles, err := stackRoles(s.roles)
	if err != nil {
		return nil, usageErr("--roles: %v", err)
	}
	if err := s.prepare(w); err != nil {
		return nil, err
	}
	if s.temporal != "" && s.db != "" {
		return nil, usageErr("--db configures the embedded server; with --temporal none is started")
	}
	if s.temporal != "" && !workers.Reachable(s.temporal) {
		return nil, fmt.Errorf("no Temporal server at %s (--temporal): start one there, or drop --temporal and temper %s serves its own", s.temporal, s.command)
	}
	if err := os.MkdirAll(s.home, 0o755); err != nil {
		return nil, fmt.Errorf("create home %s: %w", s.home, err)
	}
	var logger *slog.Logger
	if s.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	wo, err := s.options()
	if err != nil {
		return nil, err
	}
	m := wo.Metrics
	st, err := workers.StartStack(workers.StackOptions{
		Home: s.home, Temporal: s.temporal, IP: s.ip, Port: s.port, UIPort: s.uiPort, Roles: roles, Logger: logger, DB: s.db, Kind: s.command,
		Workers: wo,
	})
	if err != nil {
		m.Close()
	}
	if pe, ok := workers.IsPortInUse(err); ok {
		flagName := "--port"
		if pe.What == "ui" {
			flagName = "--ui-port"
		}
		return nil, usageErr("%s is already in use: is `temper dev` already running? Otherwise pick another port with %s, or attach to that server with --temporal %s", pe.Addr, flagName, pe.Addr)
	}
	if err != nil {
		return nil, err
	}
	ds := &devStack{Stack: st, metrics: m}
	if st.Server != nil {
		if ds.statePath, err = workers.WriteDevState(s.home, st); err != nil {
			ds.Close()
			return nil, err
		}
	}
	return ds, nil
}

func mustRoles(s string) []string {
	r, _ := stackRoles(s)
	return r
}

// stackRoles is workers.ParseRoles plus "none": an embedded stack may serve only the server and UI, so
// that each role runs in its own `temper worker` process (cluster mode without Docker).
func stackRoles(s string) ([]string, error) {
	if strings.TrimSpace(s) == "none" {
		return nil, nil
	}
	return workers.ParseRoles(s)
}

// serve runs the stack until ctx ends (temper dev and temper server).
func (s *stackFlags) serve(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return usageErr("%s takes no arguments, got %q", s.command, args)
	}
	st, err := s.start(stdout)
	if err != nil {
		return err
	}
	defer st.Close()
	if st.Server != nil {
		state := s.home
		if s.db != "" {
			state = "PostgreSQL " + devserver.Redact(s.db)
		}
		fmt.Fprintf(stdout, "Temporal  %s (state in %s)\n", st.Address, state)
		if st.UIURL != "" {
			fmt.Fprintf(stdout, "Web UI    %s\n", st.UIURL)
		}
	} else {
		fmt.Fprintf(stdout, "Temporal  %s (external, --temporal: no server started here)\n", st.Address)
	}
	if st.metrics != nil {
		fmt.Fprintf(stdout, "Metrics   http://%s/metrics\n", st.metrics.Addr)
	}
	if ws := mustRoles(s.roles); len(ws) > 0 {
		fmt.Fprintf(stdout, "Workers   %s\nCtrl-C stops.\n", strings.Join(ws, ", "))
	} else {
		fmt.Fprintf(stdout, "Workers   none here: start `temper worker --roles ROLE --temporal %s` per role\nCtrl-C stops.\n", st.Address)
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping")
	return nil
}
