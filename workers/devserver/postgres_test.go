package devserver

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func TestPostgresConfig(t *testing.T) {
	s, v, err := PostgresConfig("postgres://u:p%40ss@db.example:6000/temper?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if s.ConnectAddr != "db.example:6000" || s.User != "u" || s.Password != "p@ss" || s.DatabaseName != "temper" ||
		v.DatabaseName != "temper_visibility" || s.ConnectAttributes["sslmode"] != "disable" || v.ConnectAttributes["sslmode"] != "disable" {
		t.Fatalf("store %+v visibility %+v", s, v)
	}
	if s, _, err := PostgresConfig("postgresql://u@h"); err != nil || s.ConnectAddr != "h:5432" || s.DatabaseName != "temporal" {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	for _, bad := range []string{"mysql://u:secret@h/db", "postgres:///db", "h:5432"} {
		if _, _, err := PostgresConfig(bad); err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: %v, want an error without the password", bad, err)
		}
	}
}

// TestPostgresServer (set TEMPER_TEST_POSTGRES to a URL, e.g. the one scripts/postgres.sh prints)
// starts the server on fresh PostgreSQL databases, runs a workflow, restarts on the same databases
// (their schema is kept) and finds the workflow's history there.
func TestPostgresServer(t *testing.T) {
	base := os.Getenv("TEMPER_TEST_POSTGRES")
	if base == "" {
		t.Skip("set TEMPER_TEST_POSTGRES=postgres://... (scripts/postgres.sh prints one)")
	}
	dsn := withDatabase(t, base, fmt.Sprintf("devserver_test_%d", time.Now().UnixNano()))
	hello := func(ctx workflow.Context, name string) (string, error) { return "hello " + name, nil }
	start := func() (*Server, client.Client) {
		srv, err := Start(Options{NoUI: true, Postgres: dsn})
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr(), Namespace: srv.Namespace()})
		if err != nil {
			srv.Stop()
			t.Fatal(err)
		}
		return srv, c
	}
	srv, c := start()
	w := worker.New(c, "q", worker.Options{})
	w.RegisterWorkflowWithOptions(hello, workflow.RegisterOptions{Name: "hello"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pg-hello", TaskQueue: "q"}, "hello", "pg")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "hello pg" {
		t.Fatalf("workflow: %q %v", got, err)
	}
	w.Stop()
	c.Close()
	srv.Stop()

	srv, c = start() // the same databases: schema set up already, namespace kept
	defer srv.Stop()
	defer c.Close()
	desc, err := c.DescribeWorkflowExecution(ctx, "pg-hello", "")
	if err != nil || desc.WorkflowExecutionInfo.GetStatus().String() != "Completed" {
		t.Fatalf("after restart: %v %v", desc.GetWorkflowExecutionInfo().GetStatus(), err)
	}
}

// withDatabase replaces the database of a postgres URL.
func withDatabase(t *testing.T, dsn, db string) string {
	i := strings.Index(dsn, "://")
	j := strings.IndexAny(dsn[i+3:], "/?")
	if i < 0 || j < 0 {
		t.Fatalf("TEMPER_TEST_POSTGRES=%q: want postgres://user:password@host:port/db", dsn)
	}
	rest := dsn[i+3+j:]
	if k := strings.IndexByte(rest, '?'); k >= 0 {
		rest = rest[k:]
	} else {
		rest = ""
	}
	return dsn[:i+3+j] + "/" + db + rest
}
