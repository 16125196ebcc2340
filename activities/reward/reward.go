package reward

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/verify"
)

// DefaultItemTimeout bounds the judging of one item when ScoreInput.ItemTimeout is zero.
const DefaultItemTimeout = 60 * time.Second

// ErrInvalidInput marks bad input or config: retrying cannot help.
var ErrInvalidInput = errors.New("invalid input")

// Activities holds the reward activities' dependencies; workers/ builds it with NewActivities.
type Activities struct {
	// Sandbox runs the "code" verifier; nil leaves "code" unavailable (with a clear error).
	Sandbox *sandbox.Sandbox
	// Workers is the default number of items judged at once; default GOMAXPROCS.
	Workers int
	// Ckpt reads rollouts objects from the store (NewActivities makes one; workers may share theirs).
	Ckpt     *ckpt.Client
	registry *verify.Registry
}

// NewActivities returns the activities with the built-in verifiers plus "code" on sb (which may
// be nil); their "aesthetic" scores 0 a layout the renderer refuses (drawableLayout).
func NewActivities(sb *sandbox.Sandbox) *Activities {
	r := verify.Builtins()
	_ = r.Register("code", newCodeFactory(sb)) // cannot clash: "code" is not a built-in name
	_ = r.Register(TaskVerifier, newTaskVerifier)
	_ = r.Replace("aesthetic", verify.AestheticFactory(drawableLayout)) // a built-in name: cannot fail
	return &Activities{Sandbox: sb, Ckpt: ckpt.New(ckpt.Options{}), registry: r}
}

// Registry returns the verifiers the activities know; callers may Register more before use.
func (a *Activities) Registry() *verify.Registry { return a.registry }

// Register registers the reward activity under its contract name on the reward queue's worker.
func Register(r train.Registrar, a *Activities) {
	r.RegisterActivityWithOptions(a.Score, activity.RegisterOptions{Name: rewardapi.ScoreName})
}

// Score is the reward.Score activity: ScoreItems with heartbeats. Bad input fails without
// retries; a retried attempt simply scores everything again (verifiers are pure or sandboxed,
// so that is safe).
func (a *Activities) Score(ctx context.Context, in rewardapi.ScoreInput) (rewardapi.ScoreOutput, error) {
	out, err := a.ScoreItems(ctx, in, func(p rewardapi.Progress) { activity.RecordHeartbeat(ctx, p) })
	if errors.Is(err, ErrInvalidInput) {
		return rewardapi.ScoreOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", err)
	}
	return out, err
}

// ScoreItems judges the items with a bounded pool of workers, each item under its own timeout,
// and calls progress (from one goroutine at a time) about once a second and at the end. It is
// the activity without Temporal, for tests and tools.
func (a *Activities) ScoreItems(ctx context.Context, in rewardapi.ScoreInput, progress func(rewardapi.Progress)) (rewardapi.ScoreOutput, error) {
	reg := a.registry
	if reg == nil {
		reg = NewActivities(a.Sandbox).registry
	}
	rolloutsURI := in.Rollouts
	switch {
	case in.Rollouts != "" && len(in.Items) > 0:
		return rewardapi.ScoreOutput{}, fmt.Errorf("reward: score: set rollouts or items, not both: %w", ErrInvalidInput)
	case in.Rollouts != "":
		items, err := rolloutItems(ctx, a.Ckpt, in.Rollouts)
		if err != nil {
			return rewardapi.ScoreOutput{}, err
		}
		if !in.WriteVerdicts && len(items) > rewardapi.MaxItems { // inline verdicts travel in the payload
			return rewardapi.ScoreOutput{}, fmt.Errorf("reward: score %s: %d rollouts: at most %d per call with inline verdicts (set write_verdicts): %w",
				in.Rollouts, len(items), rewardapi.MaxItems, ErrInvalidInput)
		}
		in.Items, in.Rollouts = items, ""
	case in.WriteVerdicts:
		return rewardapi.ScoreOutput{}, fmt.Errorf("reward: score: write_verdicts needs a rollouts object: %w", ErrInvalidInput)
	case len(in.Items) > rewardapi.MaxItems:
		return rewardapi.ScoreOutput{}, fmt.Errorf("reward: score: %d items: at most %d per call: %w", len(in.Items), rewardapi.MaxItems, ErrInvalidInput)
	case in.Workers < 0:
		return rewardapi.ScoreOutput{}, fmt.Errorf("reward: score: workers=%d: want >= 0 (0 = default): %w", in.Workers, ErrInvalidInput)
	case in.ItemTimeout < 0:
		return rewardapi.ScoreOutput{}, fmt.Errorf("reward: score: item_timeout=%v: want >= 0 (0 = %v): %w", in.ItemTimeout.D(), DefaultItemTimeout, ErrInvalidInput)
	}
	if len(in.Spec.Verifiers) == 0 {
		in.Spec.Verifiers = []verify.Component{{Name: TaskVerifier}}
	}
	comp, err := reg.Compose(in.Spec)
	if err != nil {
		return rewardapi.ScoreOutput{}, fmt.Errorf("reward: score: %w: %w", err, ErrInvalidInput)
	}
	workers := in.Workers
	workers = cmp.Or(workers, a.Workers)
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	timeout := in.ItemTimeout.D()
	timeout = cmp.Or(timeout, DefaultItemTimeout)
	if progress == nil {
		progress = func(rewardapi.Progress) {}
	}

	n := len(in.Items)
	verdicts := make([]rewardapi.ItemVerdict, n)
	timedOut := make([]bool, n)
	var done atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				verdicts[i], timedOut[i] = judge(ctx, comp, in.Items[i], timeout)
				done.Add(1)
			}
		}()
	}
	stopBeat := make(chan struct{})
	beatDone := make(chan struct{})
	go func() { // heartbeats keep flowing even while one slow item (a cold Go build) runs
		defer close(beatDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-tick.C:
				progress(rewardapi.Progress{Step: int(done.Load()), Total: n})
			}
		}
	}()
	var cancelled error
dispatch:
	for i := range in.Items {
		select {
		case jobs <- i:
		case <-ctx.Done():
			cancelled = ctx.Err()
			break dispatch
		}
	}
	close(jobs)
	wg.Wait()
	close(stopBeat)
	<-beatDone
	if cancelled != nil {
		return rewardapi.ScoreOutput{}, fmt.Errorf("reward: score %d items: stopped after %d: %w", n, done.Load(), cancelled)
	}
	progress(rewardapi.Progress{Step: n, Total: n})
	out := rewardapi.ScoreOutput{Verdicts: verdicts, Metrics: summarize(verdicts, timedOut, comp.Labels())}
	if a.Sandbox != nil {
		out.Metrics.SandboxMode = string(a.Sandbox.Mode())
	}
	if in.WriteVerdicts {
		return a.byReference(ctx, rolloutsURI, out, in.MaxFailed)
	}
	return out, nil
}

// judge scores one item under its own timeout, turning errors, timeouts and panics into an
// item error. A verifier that ignores its context keeps running in the background after the
// timeout; built-ins are bounded and the sandbox obeys the context.
func judge(ctx context.Context, v verify.Verifier, it rewardapi.Item, timeout time.Duration) (rewardapi.ItemVerdict, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		v   verify.Verdict
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- result{err: fmt.Errorf("verifier panicked: %v", r)}
			}
		}()
		v, err := v.Verify(ctx, verify.Sample{Prompt: it.Prompt, Completion: it.Completion, Reference: it.Reference})
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			if ctx.Err() != nil && errors.Is(r.err, context.DeadlineExceeded) {
				return rewardapi.ItemVerdict{ID: it.ID, Error: "timeout"}, true
			}
			return rewardapi.ItemVerdict{ID: it.ID, Error: r.err.Error()}, false
		}
		return rewardapi.ItemVerdict{ID: it.ID, Verdict: r.v}, false
	case <-ctx.Done():
		return rewardapi.ItemVerdict{ID: it.ID, Error: "timeout"}, true
	}
}

func summarize(vs []rewardapi.ItemVerdict, timedOut []bool, labels []string) rewardapi.Metrics {
	m := rewardapi.Metrics{Items: len(vs)}
	sums := make([]float64, len(labels))
	var score float64
	passed := 0
	for i, v := range vs {
		if timedOut[i] {
			m.TimedOut++
		}
		if v.Error != "" {
			m.Errors++
			continue
		}
		m.Judged++
		score += v.Score
		if v.Pass {
			passed++
		}
		for j, l := range labels {
			sums[j] += v.Partial[l]
		}
	}
	for j, l := range labels {
		vm := rewardapi.VerifierMetric{Name: l}
		if m.Judged > 0 {
			vm.MeanScore = sums[j] / float64(m.Judged)
		}
		m.Verifiers = append(m.Verifiers, vm)
	}
	if m.Judged > 0 {
		m.MeanScore = score / float64(m.Judged)
		m.PassRate = float64(passed) / float64(m.Judged)
	}
	m.Passed = passed
	return m
}
