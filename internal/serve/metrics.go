package serve

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"net/http"
)

// Metrics are the server's Prometheus series (prefix temper_serve_): queue depth, running rows,
// generated tokens (a counter, and a tokens/s gauge over the last rateWindow), time to first token,
// per-request latency, prefill and decode step times, KV-cache bytes and budget, requests by
// endpoint and status, and rejections.
type Metrics struct {
	Registry *prometheus.Registry

	queue, running, kvBytes, kvBudget prometheus.Gauge
	tokens                            prometheus.Counter
	ttft, prefill, step               prometheus.Histogram
	latency                           *prometheus.HistogramVec
	requests, rejected                *prometheus.CounterVec
	rate                              *rateGauge
}

// latencyBuckets span one decode step (ms) to a long completion (minutes).
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 20)

// NewMetrics registers the series in a fresh registry.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	f := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "temper", Subsystem: "serve", Name: name, Help: help})
		reg.MustRegister(g)
		return g
	}
	h := func(name, help string) prometheus.Histogram {
		x := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "temper", Subsystem: "serve", Name: name, Help: help, Buckets: latencyBuckets})
		reg.MustRegister(x)
		return x
	}
	m := &Metrics{Registry: reg,
		queue:    f("queue_depth", "requests waiting for admission into the batch"),
		running:  f("running_rows", "rows (choices) decoding in the batch"),
		kvBytes:  f("kv_cache_bytes", "KV cache of the running rows at their current lengths (padded lanes and columns)"),
		kvBudget: f("kv_cache_budget_bytes", "the KV-cache budget admission keeps within"),
		ttft:     h("time_to_first_token_seconds", "from a request's arrival to its first sampled token"),
		prefill:  h("prefill_seconds", "one batched prefill of the rows joining"),
		step:     h("decode_step_seconds", "one decode step of the whole batch"),
	}
	m.tokens = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "temper", Subsystem: "serve", Name: "generated_tokens_total", Help: "tokens sampled"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "temper", Subsystem: "serve", Name: "request_latency_seconds",
		Help: "from a request's arrival to its last choice's end", Buckets: latencyBuckets}, []string{"outcome"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "temper", Subsystem: "serve", Name: "requests_total",
		Help: "HTTP requests by endpoint and status"}, []string{"endpoint", "status"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "temper", Subsystem: "serve", Name: "rejected_total",
		Help: "requests refused before admission, by reason"}, []string{"reason"})
	m.rate = &rateGauge{}
	rate := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "temper", Subsystem: "serve", Name: "tokens_per_second",
		Help: "tokens sampled per second over the last 10 seconds"}, m.rate.value)
	reg.MustRegister(m.tokens, m.latency, m.requests, m.rejected, rate)
	return m
}

// Handler serves the registry in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// rateWindow is the span of the tokens/s gauge.
const rateWindow = 10 * time.Second

// rateGauge counts events per second over the last rateWindow, in one-second buckets.
type rateGauge struct {
	mu     sync.Mutex
	counts [11]float64
	secs   [11]int64
}

func (g *rateGauge) add(n float64) {
	now := time.Now().Unix()
	g.mu.Lock()
	i := now % int64(len(g.counts))
	if g.secs[i] != now {
		g.secs[i], g.counts[i] = now, 0
	}
	g.counts[i] += n
	g.mu.Unlock()
}

func (g *rateGauge) value() float64 {
	now := time.Now().Unix()
	g.mu.Lock()
	defer g.mu.Unlock()
	var sum float64
	for i, s := range g.secs {
		if s > now-int64(rateWindow/time.Second) && s < now {
			sum += g.counts[i]
		}
	}
	return sum / rateWindow.Seconds()
}
