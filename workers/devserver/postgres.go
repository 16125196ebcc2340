package devserver

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"strings"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
)

// Schemas of the server's PostgreSQL stores, as embedded in the server module (go.temporal.io/server/schema).
const (
	postgresSchema           = "postgresql/v12/temporal"
	postgresVisibilitySchema = "postgresql/v12/visibility"
)

// PostgresConfig parses a PostgreSQL URL (postgres://user:password@host:port/db?sslmode=disable) into
// the server's SQL configs of its two databases: db (default "temporal") for workflows and
// db_visibility for visibility. Query parameters become connection attributes.
func PostgresConfig(dsn string) (store, visibility config.SQL, err error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return config.SQL{}, config.SQL{}, fmt.Errorf("devserver: --db %q: want postgres://user:password@host:port/database", Redact(dsn))
	}
	host, port := u.Hostname(), u.Port()
	port = cmp.Or(port, "5432")
	db := strings.TrimPrefix(u.Path, "/")
	db = cmp.Or(db, "temporal")
	store = config.SQL{PluginName: postgresql.PluginName, ConnectProtocol: "tcp", ConnectAddr: net.JoinHostPort(host, port),
		DatabaseName: db, User: u.User.Username(), ConnectAttributes: map[string]string{},
		MaxConns: 20, MaxIdleConns: 20}
	store.Password, _ = u.User.Password()
	for k, v := range u.Query() {
		store.ConnectAttributes[k] = v[0]
	}
	visibility = store
	visibility.DatabaseName = db + "_visibility"
	visibility.ConnectAttributes = map[string]string{}
	for k, v := range store.ConnectAttributes {
		visibility.ConnectAttributes[k] = v
	}
	return store, visibility, nil
}

// setupPostgres creates the two databases when missing and brings their schemas to the versions this
// server needs, with the server's own schema tool (what temporal-sql-tool's create-database,
// setup-schema -v 0.0 and update-schema do), then registers the namespace.
func setupPostgres(store, visibility config.SQL, ns *sqliteschema.NamespaceConfig, logger log.Logger) error {
	for _, c := range []struct {
		cfg    config.SQL
		schema string
	}{{store, postgresSchema}, {visibility, postgresVisibilitySchema}} {
		create := c.cfg
		if err := sqltool.DoCreateDatabase(&create, "postgres", logger); err != nil && !strings.Contains(err.Error(), "already exists") {
			return fmt.Errorf("devserver: create database %s on %s: %w", c.cfg.DatabaseName, c.cfg.ConnectAddr, err)
		}
		cfg := c.cfg
		conn, err := sqltool.NewConnection(&cfg, logger)
		if err != nil {
			return fmt.Errorf("devserver: connect to %s on %s: %w", c.cfg.DatabaseName, c.cfg.ConnectAddr, err)
		}
		err = schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run()
		if err == nil {
			err = schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: c.cfg.DatabaseName, SchemaName: c.schema}, logger).Run()
		}
		conn.Close()
		if err != nil {
			return fmt.Errorf("devserver: schema %s of %s: %w", c.schema, c.cfg.DatabaseName, err)
		}
	}
	// The namespace row is the same in every SQL store; the server's SQLite helper writes it through
	// the generic SQL layer, so it serves PostgreSQL too.
	if err := sqliteschema.CreateNamespaces(&store, ns); err != nil {
		return fmt.Errorf("devserver: create namespace in %s: %w", store.DatabaseName, err)
	}
	return nil
}

// Redact hides a URL's password in messages.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
