package workers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.temporal.io/sdk/interceptor"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
)

// Metrics serves Prometheus metrics on /metrics: the Temporal SDK's own (through its tally
// integration: the client's MetricsHandler) and Temper's, which a worker interceptor derives from
// every activity's result (loss, tokens/s, reward, sandbox verdicts) and duration. Both go through one
// tally scope into one Prometheus registry, so one scrape sees them all.
type Metrics struct {
	Addr     string // host:port actually listening
	Registry *prom.Registry
	Handler  client.MetricsHandler // for client.Options
	scope    tally.Scope
	closer   io.Closer
	srv      *http.Server
}

// StartMetrics listens on addr (":9090", "127.0.0.1:0") and serves /metrics until Close.
func StartMetrics(addr string) (*Metrics, error) {
	reg := prom.NewRegistry()
	reporter := tallyprom.NewReporter(tallyprom.Options{Registerer: reg})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	scope = sdktally.NewPrometheusNamingScope(scope)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		closer.Close()
		return nil, fmt.Errorf("workers: metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", reporter.HTTPHandler())
	m := &Metrics{Addr: l.Addr().String(), Registry: reg, Handler: sdktally.NewMetricsHandler(scope), scope: scope, closer: closer,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := m.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "temper: metrics server: %v\n", err)
		}
	}()
	return m, nil
}

// Close stops serving and flushes the scope.
func (m *Metrics) Close() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	_ = m.closer.Close()
}

// interceptor returns the worker interceptor that records Temper's series; nil without metrics.
func (m *Metrics) interceptor() interceptor.WorkerInterceptor {
	if m == nil {
		return nil
	}
	return &metricsInterceptor{scope: m.scope.SubScope("temper")}
}

type metricsInterceptor struct {
	interceptor.WorkerInterceptorBase
	scope tally.Scope
}

func (m *metricsInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &activityMetrics{scope: m.scope}
	a.Next = next
	return a
}

type activityMetrics struct {
	interceptor.ActivityInboundInterceptorBase
	scope tally.Scope
}

// durationBuckets spans a reward item (ms) to a training chunk (tens of minutes).
var durationBuckets = tally.MustMakeExponentialDurationBuckets(10*time.Millisecond, 2, 18)

func (a *activityMetrics) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	start := time.Now()
	out, err := a.Next.ExecuteActivity(ctx, in)
	info := activity.GetInfo(ctx)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	s := a.scope.Tagged(map[string]string{"activity": info.ActivityType.Name, "task_queue": info.TaskQueue})
	s.Tagged(map[string]string{"outcome": outcome}).Histogram("activity_duration_seconds", durationBuckets).RecordDuration(time.Since(start))
	if err == nil {
		recordResult(s, out)
	}
	return out, err
}

// recordResult turns the scalars of an activity's result into gauges and counters.
func recordResult(s tally.Scope, out any) {
	switch o := out.(type) {
	case trainapi.ChunkOutput:
		s.Gauge("train_loss").Update(o.Loss)
		s.Gauge("train_learning_rate").Update(o.LR)
		s.Gauge("train_step").Update(float64(o.Step))
		// Throughput is in the objective's metrics: tokens for language models, pairs or rows for
		// preference and reward chunks.
		if v, ok := o.Metrics["tokens_per_s"]; ok {
			s.Gauge("train_tokens_per_second").Update(v)
		}
		if v, ok := o.Metrics["tokens"]; ok {
			s.Counter("train_tokens_total").Inc(int64(v))
		}
	case trainapi.PolicyStepOutput:
		s.Gauge("policy_version").Update(float64(o.Version))
		for k, v := range o.Metrics { // loss, KL, entropy, reward_mean, train_tokens_per_s...: a fixed set
			s.Gauge("policy_" + k).Update(v)
		}
	case trainapi.EvalOutput:
		for k, v := range o.Metrics { // heldout_exact_match, heldout_loss...
			s.Gauge("eval_" + k).Update(v)
		}
	case rolloutapi.GenerateOutput:
		s.Gauge("rollout_tokens_per_second").Update(o.TokensPerS)
		s.Gauge("rollout_mean_length").Update(o.MeanLength)
		s.Counter("rollout_samples_total").Inc(int64(o.Samples))
	case rewardapi.ScoreOutput:
		s.Gauge("reward_mean").Update(o.Metrics.MeanScore)
		s.Gauge("reward_pass_rate").Update(o.Metrics.PassRate)
		// From the counts, not the verdicts: those stay in the store when scored by reference.
		pass, errs := int64(o.Metrics.Passed), int64(o.Metrics.Errors)
		fail := int64(o.Metrics.Judged) - pass
		verdicts := s.Tagged(map[string]string{"sandbox": o.Metrics.SandboxMode})
		verdicts.Tagged(map[string]string{"verdict": "pass"}).Counter("verdicts_total").Inc(pass)
		verdicts.Tagged(map[string]string{"verdict": "fail"}).Counter("verdicts_total").Inc(fail)
		verdicts.Tagged(map[string]string{"verdict": "error"}).Counter("verdicts_total").Inc(errs)
	}
}
