package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/temperml/temper/algorithms/tokenize"
)

// RunOptions are where Run serves and how it batches.
type RunOptions struct {
	API       net.Listener // the API (clients use http://ADDR/v1)
	Metrics   net.Listener // Prometheus' /metrics; nil: none
	Scheduler SchedulerOptions
}

// Run serves m on eng on o.API until ctx ends (`temper serve`), and says so on out, with what
// announce writes given the API's address. At the end it refuses new requests (503), ends the
// running ones, then lets the handlers finish their responses (5 s at most).
func Run(ctx context.Context, m *Model, eng Engine, o RunOptions, out io.Writer, announce func(addr net.Addr)) error {
	metrics := NewMetrics()
	if ml := o.Metrics; ml != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.Handler())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = ms.Serve(ml) }()
		defer ms.Close()
		fmt.Fprintf(out, "metrics   http://%s/metrics\n", ml.Addr())
	}
	srv := New(m, eng, Options{Metrics: metrics, Scheduler: o.Scheduler})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(o.API) }()
	announce(o.API.Addr())
	select {
	case <-ctx.Done():
	case err := <-served:
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	return nil
}

// ChatWith says how the model's chat requests are written: its own template, DefaultChat, or none.
func (m *Model) ChatWith() string {
	if m.Format != nil {
		return "its own chat template (" + m.Format.Template.Name + ", tool calls: " + string(m.Format.Tools) + ")"
	}
	if _, ok := m.Tok.(tokenize.Byte); ok {
		return "Temper's DefaultChat (byte-level)"
	}
	return "no chat template: completions only"
}
