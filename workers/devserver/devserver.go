// Package devserver runs a real Temporal server (SQLite persistence, or PostgreSQL with its schema set
// up by the server's own tool: postgres.go) and, optionally, the Temporal Web UI inside the current
// process. It is what `temper dev`, `temper demo` and the integration-test helper use,
// so that a fresh machine needs nothing installed by hand.
//
// The wiring follows the Temporal CLI's dev server (MIT licence), adapted to server v1.32.
package devserver

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// Options configures an embedded server. Zero ports mean "pick a free one".
type Options struct {
	// IP every listener binds to; default 127.0.0.1.
	IP string
	// FrontendPort is the gRPC port clients and workers dial (7233 for `temper dev`).
	FrontendPort int
	// UIPort serves the Web UI; 0 with NoUI disables it.
	UIPort int
	// NoUI turns the Web UI off (tests).
	NoUI bool
	// DBFile is the SQLite file; empty means in-memory (state lost on exit).
	DBFile string
	// Postgres, a postgres:// URL, stores the server's state in PostgreSQL instead of SQLite
	// (postgres.go): its databases and schemas are set up at start when missing.
	Postgres string
	// Namespace registered at start; default "default".
	Namespace string
	// SearchAttributes registered on the namespace at start.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives server logs at LogLevel and above; nil discards them.
	Logger   *slog.Logger
	LogLevel slog.Level
	// DynamicConfig overrides server dynamic config keys (tests use it to make continue-as-new likely).
	DynamicConfig map[string]any
}

// Server is a running embedded Temporal server.
type Server struct {
	opts     Options
	server   temporal.Server
	ui       *uiserver.Server
	uiErr    chan error
	stopOnce sync.Once
}

// PortInUseError says which listener could not bind, so the CLI can name the flag to change.
type PortInUseError struct {
	What string // "frontend" or "ui"
	Addr string
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("devserver: %s address %s is already in use", e.What, e.Addr)
}

// Start builds and starts the server (and UI). It returns once the frontend accepts connections.
func Start(opts Options) (*Server, error) {
	opts.IP = cmp.Or(opts.IP, "127.0.0.1")
	opts.Namespace = cmp.Or(opts.Namespace, "default")
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(discard{}, nil))
		opts.LogLevel = slog.LevelError + 100
	}
	var err error
	autoFrontend := opts.FrontendPort == 0
	if autoFrontend {
		if opts.FrontendPort, err = FreePort(opts.IP); err != nil {
			return nil, err
		}
	} else if err := checkFree(opts.IP, opts.FrontendPort); err != nil {
		return nil, &PortInUseError{What: "frontend", Addr: hostPort(opts.IP, opts.FrontendPort)}
	}
	if !opts.NoUI {
		if opts.UIPort == 0 {
			if opts.UIPort, err = FreePort(opts.IP); err != nil {
				return nil, err
			}
		} else if err := checkFree(opts.IP, opts.UIPort); err != nil {
			return nil, &PortInUseError{What: "ui", Addr: hostPort(opts.IP, opts.UIPort)}
		}
	}
	srv, err := buildServer(&opts, autoFrontend)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, server: srv, uiErr: make(chan error, 1)}
	if _, err := guard(func() (struct{}, error) { return struct{}{}, srv.Start() }); err != nil {
		return nil, fmt.Errorf("devserver: start temporal: %w", err)
	}
	if !opts.NoUI {
		s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
			Host:                opts.IP,
			Port:                opts.UIPort,
			TemporalGRPCAddress: s.FrontendAddr(),
			EnableUI:            true,
			DefaultNamespace:    opts.Namespace,
			DisableNewsFetch:    true,
			CORS:                uiconfig.CORS{CookieInsecure: true},
			HideLogs:            true,
		}))
		go func() { s.uiErr <- s.ui.Start() }()
		if err := waitHTTP(s.UIURL(), 10*time.Second); err != nil {
			s.Stop()
			return nil, fmt.Errorf("devserver: web ui on %s: %w", s.UIURL(), err)
		}
	}
	return s, nil
}

// FrontendAddr is the host:port that clients dial.
func (s *Server) FrontendAddr() string { return hostPort(s.opts.IP, s.opts.FrontendPort) }

// UIURL is the Web UI's base URL, or "" without a UI.
func (s *Server) UIURL() string {
	if s.opts.NoUI {
		return ""
	}
	return "http://" + hostPort(s.opts.IP, s.opts.UIPort)
}

// Namespace is the namespace registered at start.
func (s *Server) Namespace() string { return s.opts.Namespace }

// Stop stops the UI and the server; safe to call twice.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.ui != nil {
			s.ui.Stop()
		}
		_ = s.server.Stop()
	})
}

// buildServer sets up the stores and builds the server. The ports it picks itself (the internal
// services', and the frontend's when autoFrontend) are free when picked but not reserved: another
// process's outgoing connection, or another test package's server, can take one before Temporal binds it
// (seen in CI: "failed listening for HTTP API on 127.0.0.1:38907: bind: address already in use"). Such a
// build is retried with fresh ports, a few times; o.FrontendPort is updated when it is re-picked.
func buildServer(o *Options, autoFrontend bool) (temporal.Server, error) {
	ns, err := sqliteschema.NewNamespaceConfig("active", o.Namespace, false, o.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("devserver: namespace %s: %w", o.Namespace, err)
	}
	logger := slogLogger{log: o.Logger, level: o.LogLevel}
	var conf config.Config
	if o.Postgres != "" {
		store, vis, err := PostgresConfig(o.Postgres)
		if err != nil {
			return nil, err
		}
		if err := setupPostgres(store, vis, ns, logger); err != nil {
			return nil, err
		}
		conf.Persistence.DefaultStore = "postgres-default"
		conf.Persistence.VisibilityStore = "postgres-visibility"
		conf.Persistence.DataStores = map[string]config.DataStore{"postgres-default": {SQL: &store}, "postgres-visibility": {SQL: &vis}}
	} else if err := sqliteStores(*o, ns, &conf); err != nil {
		return nil, err
	}
	const attempts = 5
	for attempt := 1; ; attempt++ {
		srv, err := newServer(*o, &conf, logger)
		if err == nil || attempt == attempts || !addrInUse(err) {
			return srv, err
		}
		if autoFrontend {
			if o.FrontendPort, err = FreePort(o.IP); err != nil {
				return nil, err
			}
		}
	}
}

// addrInUse reports whether err is a failed bind because the address was taken. Temporal's fx
// wiring does not always keep the error chain, so its text is checked too.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// sqliteStores sets up the SQLite file (or memory) store and its namespace in conf.
func sqliteStores(o Options, ns *sqliteschema.NamespaceConfig, conf *config.Config) error {
	sqlConf := config.SQL{PluginName: sqliteplugin.PluginName}
	if o.DBFile == "" {
		sqlConf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sqlConf.DatabaseName = strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	} else {
		sqlConf.ConnectAttributes = map[string]string{"mode": "rwc"}
		sqlConf.DatabaseName = o.DBFile
		if _, err := os.Stat(o.DBFile); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(o.DBFile), 0o755); err != nil {
				return fmt.Errorf("devserver: create %s: %w", filepath.Dir(o.DBFile), err)
			}
			if err := sqliteschema.SetupSchema(&sqlConf); err != nil {
				return fmt.Errorf("devserver: set up schema in %s: %w", o.DBFile, err)
			}
		}
	}
	if err := sqliteschema.CreateNamespaces(&sqlConf, ns); err != nil {
		return fmt.Errorf("devserver: create namespace %s: %w", o.Namespace, err)
	}
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: &sqlConf}}
	return nil
}

// newServer completes conf (one history shard, static hosts, ports) and builds the server.
func newServer(o Options, confp *config.Config, logger slogLogger) (temporal.Server, error) {
	conf := confp
	httpPort, err := FreePort(o.IP)
	if err != nil {
		return nil, err
	}
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = o.IP
	conf.Persistence.NumHistoryShards = 1
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        "active",
		CurrentClusterName:       "active",
		ClusterInformation: map[string]cluster.ClusterInformation{
			"active": {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             hostPort(o.IP, o.FrontendPort),
				HTTPAddress:            hostPort(o.IP, httpPort),
				ClusterID:              "temper-dev",
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	ports := map[string]int{"frontend": o.FrontendPort}
	for _, svc := range []string{"history", "matching", "worker"} {
		if ports[svc], err = FreePort(o.IP); err != nil {
			return nil, err
		}
	}
	conf.Services = map[string]config.Service{}
	for svc, p := range ports {
		var sc config.Service
		sc.RPC.GRPCPort = p
		sc.RPC.BindOnIP = o.IP
		if svc == "frontend" {
			sc.RPC.HTTPPort = httpPort
		}
		conf.Services[svc] = sc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = hostPort(o.IP, o.FrontendPort)

	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("devserver: authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("devserver: claim mapper: %w", err)
	}
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// New search attributes must be visible at once in tests and `temper ls`.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true,
	}
	for k, v := range o.DynamicConfig {
		dyn[dynamicconfig.MakeKey(k)] = v
	}
	hosts := map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(hostPort(o.IP, ports["frontend"])),
		primitives.MatchingService: static.SingleLocalHost(hostPort(o.IP, ports["matching"])),
		primitives.HistoryService:  static.SingleLocalHost(hostPort(o.IP, ports["history"])),
		primitives.WorkerService:   static.SingleLocalHost(hostPort(o.IP, ports["worker"])),
	}
	srv, err := guard(func() (temporal.Server, error) {
		return temporal.NewServer(
			temporal.WithConfig(conf),
			temporal.ForServices(temporal.DefaultServices),
			temporal.WithStaticHosts(hosts),
			temporal.WithLogger(logger),
			temporal.WithAuthorizer(authorizer),
			temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
			temporal.WithDynamicConfigClient(dyn),
		)
	})
	if err != nil {
		return nil, fmt.Errorf("devserver: build temporal: %w", err)
	}
	return srv, nil
}

// FreePort asks the kernel for a free TCP port on ip.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", hostPort(ip, 0))
	if err != nil {
		return 0, fmt.Errorf("devserver: find free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func checkFree(ip string, port int) error {
	l, err := net.Listen("tcp", hostPort(ip, port))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
		return err
	}
	return l.Close()
}

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

func waitHTTP(url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

var _ log.Logger = slogLogger{}
