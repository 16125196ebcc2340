package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/temperml/temper/workers/devserver"
)

// Defaults for the embedded dev stack.
const (
	DefaultTemporalPort = 7233
	DefaultUIPort       = 8233
	DefaultNamespace    = "default"
)

// Home returns $TEMPER_HOME, or ~/.temper.
func Home() string {
	if h := os.Getenv("TEMPER_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".temper")
	}
	return ".temper"
}

// DefaultStoreURI is file://$TEMPER_HOME/store (absolute): where runs keep checkpoints unless their
// pipeline names a store.
func DefaultStoreURI() string {
	abs, err := filepath.Abs(filepath.Join(Home(), "store"))
	if err != nil {
		abs = filepath.Join(Home(), "store")
	}
	return "file://" + abs
}

// StackOptions configures a Stack.
type StackOptions struct {
	Home      string // state directory; the SQLite file lives at Home/temporal.db
	Temporal  string // host:port of an existing server; empty starts an embedded one
	IP        string // bind address of the embedded server; default 127.0.0.1
	Port      int    // embedded gRPC port (flag --port)
	UIPort    int    // embedded Web UI port (flag --ui-port); -1 disables the UI
	Namespace string
	Roles     []string // workers to run; empty runs none
	Ephemeral bool     // in-memory SQLite (tests)
	// Kind is the command serving the embedded server ("dev" or "demo"), recorded on its namespace
	// (StackKindKey) so that a demo can tell a lasting `temper dev` from another demo's server.
	Kind string
	// DB, a postgres:// URL, keeps the embedded server's state in PostgreSQL instead of SQLite.
	DB      string
	Logger  *slog.Logger
	Workers Options
}

// Stack is a Temporal client, optionally an embedded server, and workers.
type Stack struct {
	Client  client.Client
	Server  *devserver.Server // nil when attached to an external server
	Workers []worker.Worker
	UIURL   string
	Address string
}

// StartStack starts what opts asks for and returns once workers poll.
func StartStack(opts StackOptions) (*Stack, error) {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	s := &Stack{Address: opts.Temporal}
	if opts.Temporal == "" {
		dso := devserver.Options{
			IP: opts.IP, FrontendPort: opts.Port, UIPort: opts.UIPort, NoUI: opts.UIPort < 0,
			Namespace: opts.Namespace, Logger: opts.Logger, LogLevel: slog.LevelWarn, SearchAttributes: SearchAttributes(),
		}
		switch {
		case opts.DB != "":
			dso.Postgres = opts.DB
		case !opts.Ephemeral:
			dso.DBFile = filepath.Join(opts.Home, "temporal.db")
		}
		srv, err := devserver.Start(dso)
		if err != nil {
			return nil, err
		}
		s.Server, s.Address, s.UIURL = srv, srv.FrontendAddr(), srv.UIURL()
	}
	c, err := DialWithMetrics(s.Address, opts.Namespace, opts.Workers.Metrics)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Client = c
	if s.Server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := EnsureSearchAttributes(ctx, c, opts.Namespace)
		if err == nil && opts.Kind != "" {
			err = markStackKind(ctx, c, opts.Namespace, opts.Kind)
		}
		cancel()
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	if len(opts.Roles) > 0 {
		if s.Workers, err = Start(c, opts.Roles, opts.Workers); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close stops workers, the client and the embedded server.
func (s *Stack) Close() {
	StopAll(s.Workers)
	s.Workers = nil
	if s.Client != nil {
		s.Client.Close()
	}
	if s.Server != nil {
		s.Server.Stop()
	}
}

// Dial connects to a Temporal frontend, waiting up to 20 s for it to answer.
func Dial(addr, namespace string) (client.Client, error) {
	return DialWithMetrics(addr, namespace, nil)
}

// DialWithMetrics is Dial whose client (and the workers built on it) report the SDK's metrics to m.
func DialWithMetrics(addr, namespace string, m *Metrics) (client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := client.Options{HostPort: addr, Namespace: namespace, Logger: quietLogger()}
	if m != nil {
		opts.MetricsHandler = m.Handler
	}
	var last error
	for ctx.Err() == nil {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("workers: dial temporal at %s: %w", addr, last)
}

// Reachable reports whether something accepts TCP connections at addr.
func Reachable(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// IsPortInUse tells a port conflict apart from other start-up errors.
func IsPortInUse(err error) (*devserver.PortInUseError, bool) {
	var pe *devserver.PortInUseError
	ok := errors.As(err, &pe)
	return pe, ok
}

// quietLogger keeps the SDK's info chatter out of the CLI's output; warnings still show.
func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}
