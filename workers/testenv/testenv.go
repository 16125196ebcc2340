// Package testenv starts one real, in-process Temporal server per test binary (SQLite in memory, no UI)
// and workers on it. Integration tests of every layer use it; nothing here is a mock.
package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/devserver"
)

// Env is the shared server and a client on it.
type Env struct {
	Server *devserver.Server
	Client client.Client
}

var (
	once     sync.Once
	shared   *Env
	startErr error
)

// DynamicConfig may be set by a package's TestMain before the first Get to tune the server.
var DynamicConfig map[string]any

// Get returns the package's server, starting it on first use. It is stopped when the test binary exits.
func Get(t testing.TB) *Env {
	t.Helper()
	once.Do(func() {
		var logger *slog.Logger
		if os.Getenv("TEMPER_TEST_SERVER_LOGS") != "" {
			logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
		srv, err := devserver.Start(devserver.Options{NoUI: true, Logger: logger, LogLevel: slog.LevelWarn, DynamicConfig: DynamicConfig,
			SearchAttributes: workers.SearchAttributes()})
		if err != nil {
			startErr = err
			return
		}
		c, err := workers.Dial(srv.FrontendAddr(), srv.Namespace())
		if err != nil {
			srv.Stop()
			startErr = err
			return
		}
		shared = &Env{Server: srv, Client: c}
	})
	if startErr != nil {
		t.Fatalf("testenv: start temporal: %v", startErr)
	}
	return shared
}

// Worker starts a worker on queue with register's registrations; it stops when the test ends.
func (e *Env) Worker(t testing.TB, queue string, register func(worker.Registry)) worker.Worker {
	t.Helper()
	w := worker.New(e.Client, queue, worker.Options{WorkflowPanicPolicy: worker.FailWorkflow})
	register(w)
	if err := w.Start(); err != nil {
		t.Fatalf("testenv: start worker on %s: %v", queue, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// Roles starts Temper's real workers for the given roles (all when none); they stop when the test ends.
func (e *Env) Roles(t testing.TB, roles ...string) []worker.Worker {
	t.Helper()
	if len(roles) == 0 {
		roles, _ = workers.ParseRoles("all")
	}
	ws, err := workers.Start(e.Client, roles, workers.Options{})
	if err != nil {
		t.Fatalf("testenv: start workers %v: %v", roles, err)
	}
	t.Cleanup(func() { workers.StopAll(ws) })
	return ws
}

// Namespace registers a fresh namespace (without Temper's search attributes, as on a cluster nobody
// prepared) and returns its name once the server answers on it.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
	nc, err := client.NewNamespaceClient(client.Options{HostPort: e.Server.FrontendAddr()})
	if err != nil {
		t.Fatalf("testenv: namespace client: %v", err)
	}
	defer nc.Close()
	ctx := context.Background()
	if err := nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: ns,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}); err != nil {
		t.Fatalf("testenv: register namespace %s: %v", ns, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := nc.Describe(ctx, ns)
		if err == nil {
			return ns
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: namespace %s: %v", ns, err)
		}
	}
}
