package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
)

// Engine is a continuous batch of one model's cached decode (tpu.Decoder satisfies it): rows join
// with a batched prefill, every live row advances one token per Step, rows leave between steps.
type Engine interface {
	// Join prefills prompts as new rows: their ids and next-token logits [len(prompts)·vocab].
	Join(prompts [][]int) (ids []int, logits []float32, err error)
	// Step feeds tokens[i] to row ids[i] (every live row once): next-token logits in that order.
	Step(ids, tokens []int) (logits []float32, err error)
	// Leave removes a row.
	Leave(id int) error
}

// SchedulerOptions bound the continuous batch. Zero values take the defaults.
type SchedulerOptions struct {
	MaxBatch int   // rows decoding at once; default 64
	MaxQueue int   // requests waiting for admission; default 256
	KVBudget int64 // bytes the KV cache may reach (float32, padded lanes and columns); default 1 GiB
}

// Defaults of SchedulerOptions.
const (
	DefaultMaxBatch = 64
	DefaultMaxQueue = 256
	DefaultKVBudget = 1 << 30
)

func (o SchedulerOptions) withDefaults() SchedulerOptions {
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = DefaultMaxQueue
	}
	if o.KVBudget <= 0 {
		o.KVBudget = DefaultKVBudget
	}
	return o
}

// Errors of Submit, each mapped to its HTTP status by the handlers.
var (
	ErrQueueFull = errors.New("queue full")               // 429
	ErrClosed    = errors.New("server closing")           // 503
	ErrTooLarge  = errors.New("over the KV-cache budget") // 413
)

// RowSpec is one choice of a request: a prompt and how to sample its continuation.
type RowSpec struct {
	Prompt      []int
	MaxTokens   int // > 0; prompt + MaxTokens ≤ the model's context
	Temperature float64
	TopP        float64
	Seed        uint64
	StopIDs     []int
	TopLogprobs int // alternatives reported per token (0: none)
}

// Alt is one alternative token and its log-probability.
type Alt struct {
	ID      int
	LogProb float32
}

// Token is one sampled token with the model's log-probability of it (temperature 1).
type Token struct {
	ID      int
	LogProb float32
	Top     []Alt // the TopLogprobs most likely tokens, most likely first
}

// Finish reasons of a choice.
const (
	FinishStop   = "stop"   // a stop token (the token is the last one) or, in the handlers, a stop string
	FinishLength = "length" // MaxTokens generated
)

// Event is what a Job reports: a token of one choice, possibly its last (Finish set), or the error
// that ended it.
type Event struct {
	Choice int
	Token  Token
	Finish string
	Err    error
}

// Job is a submitted request: its choices' events arrive in order through Next.
type Job struct {
	rows      []*row
	submitted time.Time

	mu     sync.Mutex
	events []Event
	wake   chan struct{}
	left   int // choices not finished

	firstOnce sync.Once
	s         *Scheduler
}

// row is one choice while it is queued or decoding.
type row struct {
	job     *Job
	choice  int
	spec    RowSpec
	sampler *sample.Sampler
	id      int // engine row id once joined
	tokens  []int
	done    bool
	cancel  atomic.Bool
}

func (j *Job) push(e Event) {
	j.mu.Lock()
	j.events = append(j.events, e)
	if e.Finish != "" || e.Err != nil {
		j.left--
	}
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Next waits for events and returns those that arrived, in order. It returns io.EOF-like
// (nil, nil) once every choice has finished and every event was read, and ctx's error when ctx
// ends first.
func (j *Job) Next(ctx context.Context) ([]Event, error) {
	for {
		j.mu.Lock()
		ev := j.events
		j.events = nil
		left := j.left
		j.mu.Unlock()
		if len(ev) > 0 {
			return ev, nil
		}
		if left == 0 {
			return nil, nil
		}
		select {
		case <-j.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Cancel ends every choice: their rows leave the batch at the next step boundary.
func (j *Job) Cancel() {
	for i := range j.rows {
		j.CancelChoice(i)
	}
}

// CancelChoice ends one choice (the handlers found a stop string in its text).
func (j *Job) CancelChoice(i int) {
	j.rows[i].cancel.Store(true)
	j.s.poke()
}

// Scheduler runs the continuous batch: one goroutine owns the Engine.
type Scheduler struct {
	eng     Engine
	cfg     model.Config
	opts    SchedulerOptions
	metrics *Metrics
	perCol  int64 // KV bytes of one lane's column

	mu     sync.Mutex
	queue  []*Job
	closed bool
	wake   chan struct{}
	done   chan struct{}

	live    []*row // decoding, in the scheduler goroutine only
	running atomic.Int64
}

// Running is the number of rows decoding (as of the last step boundary).
func (s *Scheduler) Running() int { return int(s.running.Load()) }

// NewScheduler starts the batch loop over eng for the model cfg; metrics may be nil.
func NewScheduler(eng Engine, cfg model.Config, opts SchedulerOptions, metrics *Metrics) *Scheduler {
	s := &Scheduler{eng: eng, cfg: cfg, opts: opts.withDefaults(), metrics: metrics,
		perCol: model.CacheBytes(cfg, 1, 1), wake: make(chan struct{}, 1), done: make(chan struct{})}
	if metrics != nil {
		metrics.kvBudget.Set(float64(s.opts.KVBudget))
	}
	go s.loop()
	return s
}

// Options are the scheduler's bounds (defaults filled in).
func (s *Scheduler) Options() SchedulerOptions { return s.opts }

// need is the KV cache of n rows whose longest reaches cols tokens.
func (s *Scheduler) need(n, tokens int) int64 {
	return int64(model.Lanes(n)) * int64(model.CacheCols(tokens)) * s.perCol
}

// Fits reports whether rows alone fit the batch and the budget (else Submit fails with
// ErrTooLarge), and the bytes they need.
func (s *Scheduler) Fits(specs []RowSpec) (bool, int64) {
	longest := 0
	for _, r := range specs {
		longest = max(longest, len(r.Prompt)+r.MaxTokens)
	}
	b := s.need(len(specs), longest)
	return len(specs) <= s.opts.MaxBatch && b <= s.opts.KVBudget, b
}

// Submit queues one request's choices; they are admitted together.
func (s *Scheduler) Submit(specs []RowSpec) (*Job, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("serve: submit: no choices")
	}
	for i, r := range specs {
		if len(r.Prompt) == 0 || r.MaxTokens <= 0 || len(r.Prompt)+r.MaxTokens > s.cfg.MaxSeq {
			return nil, fmt.Errorf("serve: submit: choice %d: prompt %d + max_tokens %d: must be ≥ 1 each and fit the context %d", i, len(r.Prompt), r.MaxTokens, s.cfg.MaxSeq)
		}
	}
	if ok, b := s.Fits(specs); !ok {
		return nil, fmt.Errorf("serve: %d choices of up to %d tokens need %d MiB of KV cache in %d lanes (budget %d MiB, max batch %d): %w",
			len(specs), b/int64(len(specs))/max(s.perCol, 1), b>>20, model.Lanes(len(specs)), s.opts.KVBudget>>20, s.opts.MaxBatch, ErrTooLarge)
	}
	j := &Job{submitted: time.Now(), wake: make(chan struct{}, 1), left: len(specs), s: s}
	for i, spec := range specs {
		j.rows = append(j.rows, &row{job: j, choice: i, spec: spec,
			sampler: sample.NewSampler(sample.Options{Temperature: spec.Temperature, TopP: spec.TopP}, spec.Seed)})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if len(s.queue) >= s.opts.MaxQueue {
		if s.metrics != nil {
			s.metrics.rejected.WithLabelValues("queue_full").Inc()
		}
		return nil, fmt.Errorf("serve: %d requests waiting: %w", len(s.queue), ErrQueueFull)
	}
	s.queue = append(s.queue, j)
	if s.metrics != nil {
		s.metrics.queue.Set(float64(len(s.queue)))
	}
	s.poke()
	return j, nil
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops the loop: queued and running choices end with ErrClosed.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.poke()
	<-s.done
}

func (s *Scheduler) loop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		closed := s.closed
		empty := len(s.queue) == 0
		s.mu.Unlock()
		if closed {
			s.failAll(ErrClosed)
			return
		}
		s.dropCancelled()
		s.running.Store(int64(len(s.live)))
		if empty && len(s.live) == 0 {
			<-s.wake
			continue
		}
		s.admit()
		if len(s.live) == 0 {
			// Everything queued waits for rows that are not there: cannot happen (a job that fits
			// alone is admitted into an empty batch), but never spin.
			select {
			case <-s.wake:
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		s.step()
	}
}

// dropCancelled removes the rows whose choice was cancelled.
func (s *Scheduler) dropCancelled() {
	kept := s.live[:0]
	for _, r := range s.live {
		if r.cancel.Load() {
			s.leave(r, "")
			continue
		}
		kept = append(kept, r)
	}
	clear(s.live[len(kept):])
	s.live = kept
	s.mu.Lock()
	q := s.queue[:0]
	for _, j := range s.queue {
		all := true
		for _, r := range j.rows {
			all = all && r.cancel.Load()
		}
		if all {
			for _, r := range j.rows {
				r.done = true
				j.push(Event{Choice: r.choice, Err: context.Canceled})
			}
			continue
		}
		q = append(q, j)
	}
	s.queue = q
	s.mu.Unlock()
}

// leave takes r out of the engine; finish "" means cancelled (no event).
func (s *Scheduler) leave(r *row, finish string) {
	if err := s.eng.Leave(r.id); err != nil {
		// The row is gone either way; a second error here would only repeat the first.
		_ = err
	}
	r.done = true
	if finish == "" {
		r.job.push(Event{Choice: r.choice, Err: context.Canceled})
		s.finishJob(r.job, "cancelled")
	}
}

// admit joins queued jobs, first come first served, while the batch and the budget allow.
func (s *Scheduler) admit() {
	longest := 0
	for _, r := range s.live {
		longest = max(longest, len(r.spec.Prompt)+r.spec.MaxTokens)
	}
	var joining []*row
	s.mu.Lock()
	n := len(s.live)
	for len(s.queue) > 0 {
		j := s.queue[0]
		l := longest
		for _, r := range j.rows {
			l = max(l, len(r.spec.Prompt)+r.spec.MaxTokens)
		}
		rows := 0
		for _, r := range j.rows {
			if !r.cancel.Load() {
				rows++
			}
		}
		if n+rows > s.opts.MaxBatch || (n > 0 && s.need(n+rows, l) > s.opts.KVBudget) {
			break
		}
		s.queue = s.queue[1:]
		for _, r := range j.rows {
			if r.cancel.Load() {
				r.done = true
				j.push(Event{Choice: r.choice, Err: context.Canceled})
				continue
			}
			joining = append(joining, r)
		}
		n += rows
		longest = l
	}
	if s.metrics != nil {
		s.metrics.queue.Set(float64(len(s.queue)))
	}
	s.mu.Unlock()
	if len(joining) == 0 {
		return
	}
	prompts := make([][]int, len(joining))
	for i, r := range joining {
		prompts[i] = r.spec.Prompt
	}
	start := time.Now()
	ids, logits, err := s.eng.Join(prompts)
	if s.metrics != nil {
		s.metrics.prefill.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		for _, r := range joining {
			r.done = true
			r.job.push(Event{Choice: r.choice, Err: err})
			s.finishJob(r.job, "error")
		}
		return
	}
	for i, r := range joining {
		r.id = ids[i]
	}
	s.live = append(s.live, joining...)
	s.consume(joining, logits)
}

// step advances every live row by one token.
func (s *Scheduler) step() {
	ids := make([]int, len(s.live))
	toks := make([]int, len(s.live))
	for i, r := range s.live {
		ids[i], toks[i] = r.id, r.tokens[len(r.tokens)-1]
	}
	start := time.Now()
	logits, err := s.eng.Step(ids, toks)
	if s.metrics != nil {
		s.metrics.step.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		// A failed step loses the batch's cache: every running choice ends with the error.
		for _, r := range s.live {
			_ = s.eng.Leave(r.id)
			r.done = true
			r.job.push(Event{Choice: r.choice, Err: err})
			s.finishJob(r.job, "error")
		}
		s.live = s.live[:0]
		s.running.Store(0)
		return
	}
	s.consume(s.live, logits)
}

// consume samples one token for each of rows from logits [len(rows)·vocab], reports it, and
// removes the rows that finished.
func (s *Scheduler) consume(rows []*row, logits []float32) {
	vocab := s.cfg.Vocab
	toks := make([]Token, len(rows))
	pick := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			toks[i] = rows[i].pick(logits[i*vocab : (i+1)*vocab])
		}
	}
	// Rows are independent (own sampler each): with many rows over a large vocabulary the host's
	// softmax work is split over the cores; the tokens are those of one loop.
	workers := min(runtime.GOMAXPROCS(0), len(rows)*vocab/(1<<16))
	model.SplitRows(len(rows), workers, func(_, lo, hi int) { pick(lo, hi) })
	for i, r := range rows {
		if r.done {
			continue
		}
		t := toks[i]
		r.tokens = append(r.tokens, t.ID)
		finish := ""
		switch {
		case slices.Contains(r.spec.StopIDs, t.ID):
			finish = FinishStop
		case len(r.tokens) >= r.spec.MaxTokens:
			finish = FinishLength
		}
		if len(r.tokens) == 1 {
			r.job.firstOnce.Do(func() {
				if s.metrics != nil {
					s.metrics.ttft.Observe(time.Since(r.job.submitted).Seconds())
				}
			})
		}
		r.job.push(Event{Choice: r.choice, Token: t, Finish: finish})
		if s.metrics != nil {
			s.metrics.tokens.Inc()
			s.metrics.rate.add(1)
		}
		if finish != "" {
			_ = s.eng.Leave(r.id)
			r.done = true
			s.finishJob(r.job, "ok")
		}
	}
	kept := s.live[:0]
	for _, r := range s.live {
		if !r.done {
			kept = append(kept, r)
		}
	}
	clear(s.live[len(kept):])
	s.live = kept
	s.running.Store(int64(len(s.live)))
	if s.metrics != nil {
		s.metrics.running.Set(float64(len(s.live)))
		longest := 0
		for _, r := range s.live {
			longest = max(longest, len(r.spec.Prompt)+len(r.tokens))
		}
		if len(s.live) > 0 {
			s.metrics.kvBytes.Set(float64(s.need(len(s.live), longest)))
		} else {
			s.metrics.kvBytes.Set(0)
		}
	}
}

// finishJob records a job's latency once its last choice ended.
func (s *Scheduler) finishJob(j *Job, outcome string) {
	for _, r := range j.rows {
		if !r.done {
			return
		}
	}
	if s.metrics != nil {
		s.metrics.latency.WithLabelValues(outcome).Observe(time.Since(j.submitted).Seconds())
	}
}

// failAll ends every queued and running choice with err.
func (s *Scheduler) failAll(err error) {
	for _, r := range s.live {
		_ = s.eng.Leave(r.id)
		r.done = true
		r.job.push(Event{Choice: r.choice, Err: err})
	}
	s.live = nil
	s.mu.Lock()
	for _, j := range s.queue {
		for _, r := range j.rows {
			r.done = true
			j.push(Event{Choice: r.choice, Err: err})
		}
	}
	s.queue = nil
	s.mu.Unlock()
}

// pick samples the row's next token from logits [vocab] and reports its log-probability (and the
// top alternatives when asked).
func (r *row) pick(lg []float32) Token {
	id := r.sampler.Next(lg)
	// The maximum as sample.LogProb finds it (math.Max over float64), for finite logits; a plain
	// comparison costs a fraction of math.Max's NaN and signed-zero handling.
	m32 := float32(math.Inf(-1))
	for _, l := range lg {
		if l > m32 {
			m32 = l
		}
	}
	mx := float64(m32)
	var z float64
	for _, l := range lg {
		z += math.Exp(float64(l) - mx)
	}
	// The same arithmetic as sample.LogProb, so that a served token's log-probability is bit for
	// bit what Temper's own rollouts record for it.
	lz := math.Log(z)
	t := Token{ID: id, LogProb: float32(float64(lg[id]) - mx - lz)}
	if k := r.spec.TopLogprobs; k > 0 {
		t.Top = topK(lg, k, mx, lz)
	}
	return t
}

// topK returns the k largest logits as log-probabilities, most likely first (lower id on ties).
func topK(lg []float32, k int, mx, lz float64) []Alt {
	k = min(k, len(lg))
	best := make([]int, 0, k+1)
	for i, l := range lg {
		if len(best) == k && l <= lg[best[k-1]] {
			continue
		}
		j := len(best)
		for j > 0 && lg[best[j-1]] < l {
			j--
		}
		best = slices.Insert(best, j, i)
		if len(best) > k {
			best = best[:k]
		}
	}
	out := make([]Alt, len(best))
	for i, id := range best {
		out[i] = Alt{ID: id, LogProb: float32(float64(lg[id]) - mx - lz)}
	}
	return out
}
