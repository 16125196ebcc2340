package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
)

// maxStaleness bounds max_staleness: each version ahead is one more iteration in flight, whose
// rollouts, checkpoints read and history all stay alive until its step.
const maxStaleness = 16

// Deep async (max_staleness N > 1, or partial: true). The run keeps a queue of up to N iterations
// generating ahead of the step. Its schedule is a fixed function of the iteration number and N,
// never of which activity finishes first, so a replay or a resumed run issues the same calls:
//
//   - iteration 0 generates its rollouts whole with policy v0; an iteration with nothing ahead
//     (the first after a back-track) does the same with the current policy;
//   - after iteration i has its rollouts (policy v_i current), iterations up to i+N (and below
//     iterations) that are not in flight start, with v_i: iteration j starts at iteration j−N;
//   - whole (partial false): an iteration in flight is one generation per shard, each scored as
//     soon as it exists, beside the steps (as one-step-off's pipelined source);
//   - partial: an iteration in flight generates segments of segment_tokens per row. At each
//     iteration i, in iteration order, every iteration in flight waits for its last segment and,
//     if rows are unfinished, starts the next one under v_i: a generation continues under the new
//     weights. When iteration j's step comes, its unfinished rows are finished under v_j; once an
//     iteration has every row, its shards are scored.
//
// Continue-as-new waits for the calls in flight and carries the queue (RLState.Flights); the next
// run resumes the schedule where it stood (scoring is redone: the same verdicts). A back-track
// waits for the queue and forgets it: its policy is the one the run leaves.

// segmentTokens is a partial run's segment budget: segment_tokens, or the generation spread over
// max_staleness+1 versions.
func (c *RLConfig) segmentTokens() int {
	if c.SegmentTokens > 0 {
		return c.SegmentTokens
	}
	return (c.MaxNewTokens + c.MaxStaleness) / (c.MaxStaleness + 1)
}

// deepSource returns the run's deep async source, or nil when its config asks for one-step-off.
func (r *rlRun) deepSource(fan rlFanOut) rolloutSource {
	if r.cfg.MaxStaleness <= 1 && !r.cfg.Partial {
		return nil
	}
	if workflow.GetVersion(r.ctx, versionDeepAsync, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	s := &deepSource{shardedSource: shardedSource{fan: fan}, n: r.cfg.MaxStaleness}
	if r.cfg.Partial {
		s.budget = r.cfg.segmentTokens()
	}
	return s
}

// AsyncFlight is an iteration generating ahead, as it travels across continue-as-new.
type AsyncFlight struct {
	Iter     int `json:"iter"`
	Version  int `json:"version"`  // the policy version of its first (oldest) tokens
	Segments int `json:"segments"` // generation calls per shard so far
	// Shards are each shard's last call; Tokens and Seconds sum all its calls.
	Shards []rolloutapi.GenerateOutput `json:"shards"`
}

// unfinished says whether some shard has rows a later segment continues.
func (f *AsyncFlight) unfinished() bool {
	for _, s := range f.Shards {
		if s.Unfinished > 0 {
			return true
		}
	}
	return false
}

// flight is an iteration generating ahead, with its calls in flight.
type flight struct {
	AsyncFlight
	gens  []workflow.Future // partial: the shards' segment in flight (nil entries: shard finished)
	pipe  *rlPipe           // whole: the shards generating, each scored as it is generated
	batch *rlBatch          // partial: its scoring, once every row is finished
	err   error             // a segment that failed, reported when its iteration comes
}

// deepSource is the rollout source of deep async runs (see above).
type deepSource struct {
	shardedSource     // batch and version: the iteration next returned, for score
	n             int // max_staleness
	budget        int // partial: segment_tokens (0: whole generations)
	flights       []*flight
	restored      bool
}

// restore takes over the queue a run before continue-as-new carried (once, before anything else).
func (s *deepSource) restore(r *rlRun) {
	if s.restored {
		return
	}
	s.restored = true
	st := &r.st
	for _, af := range st.Flights {
		f := &flight{AsyncFlight: af}
		if !f.unfinished() {
			b := s.fan.started(f.Shards)
			f.batch = &b
		}
		s.flights = append(s.flights, f)
	}
	st.Flights = nil
}

func (s *deepSource) next(r *rlRun) (err error) {
	s.restore(r)
	st := &r.st
	if len(s.flights) == 0 || s.flights[0].Iter != st.Iter {
		s.version = st.Version
		s.batch, err = s.fan.await(r.ctx, s.fan.generate(st.Policy, st.Version, st.Iter))
		return err
	}
	f := s.flights[0]
	s.flights = s.flights[1:]
	s.version = f.Version
	s.batch, err = s.land(r, f)
	return err
}

// land returns flight f's shards with their scoring started, finishing its rows under the current
// policy first.
func (s *deepSource) land(r *rlRun, f *flight) (rlBatch, error) {
	if f.pipe != nil {
		return f.pipe.wait(r.ctx)
	}
	if err := s.await(r, f); err != nil {
		return rlBatch{}, err
	}
	if f.batch != nil {
		return *f.batch, nil
	}
	for f.unfinished() {
		if f.Segments > s.n+r.cfg.MaxNewTokens {
			return rlBatch{}, fmt.Errorf("iteration %d: still unfinished after %d segments", f.Iter, f.Segments)
		}
		s.segment(r, f, 0) // to the end
		if err := s.await(r, f); err != nil {
			return rlBatch{}, err
		}
	}
	return s.fan.started(f.Shards), nil
}

func (s *deepSource) ahead(r *rlRun) {
	s.restore(r)
	st := &r.st
	for _, f := range s.flights {
		if s.budget == 0 || f.err != nil {
			continue
		}
		if f.err = s.await(r, f); f.err != nil {
			continue
		}
		switch {
		case f.unfinished():
			s.segment(r, f, s.budget)
		case f.batch == nil:
			b := s.fan.started(f.Shards)
			f.batch = &b
		}
	}
	last := st.Iter
	if n := len(s.flights); n > 0 {
		last = s.flights[n-1].Iter
	}
	for j := last + 1; j <= st.Iter+s.n && j < r.cfg.Iterations; j++ {
		f := &flight{AsyncFlight: AsyncFlight{Iter: j, Version: st.Version}}
		if s.budget == 0 {
			f.Segments = 1
			f.pipe = s.fan.pipeline(r.ctx, s.fan.generate(st.Policy, st.Version, j))
		} else {
			s.segment(r, f, s.budget)
		}
		s.flights = append(s.flights, f)
	}
}

// segment starts flight f's next segment, budget tokens per row (0: to the end), under the current
// policy: each shard's first, or a continuation of its unfinished rows.
func (s *deepSource) segment(r *rlRun, f *flight, budget int) {
	st := &r.st
	n := len(s.fan.cfg.Rollout.ranges(s.fan.cfg.Prompts, s.fan.cfg.Group))
	f.gens = make([]workflow.Future, n)
	for k := range n {
		in := s.fan.input(st.Policy, st.Version, f.Iter, k)
		in.SegmentTokens, in.Tag = budget, fmt.Sprintf("%s-g%02d", in.Tag, f.Segments)
		if f.Shards != nil {
			if f.Shards[k].Unfinished == 0 {
				continue
			}
			in.Continue = f.Shards[k].Rollouts
		}
		f.gens[k] = workflow.ExecuteActivity(s.fan.rolloutCtx, rolloutapi.GenerateName, in)
	}
	f.Segments++
}

// await waits for flight f's segment in flight, if any, shard by shard in order, and keeps its
// results (the tokens and seconds of every call summed).
func (s *deepSource) await(r *rlRun, f *flight) error {
	if f.gens == nil {
		return f.err
	}
	gens := f.gens
	f.gens = nil
	shards := make([]rolloutapi.GenerateOutput, len(gens))
	for k, g := range gens {
		if g == nil {
			shards[k] = f.Shards[k]
			continue
		}
		if err := g.Get(r.ctx, &shards[k]); err != nil {
			drainSome(r.ctx, gens[k+1:])
			return fmt.Errorf("iteration %d segment %d, shard %d of %d: %w", f.Iter, f.Segments-1, k, len(gens), err)
		}
		if f.Shards != nil {
			shards[k].Tokens += f.Shards[k].Tokens
			shards[k].Seconds += f.Shards[k].Seconds
		}
	}
	f.Shards = shards
	return nil
}

func (s *deepSource) drop(r *rlRun) {
	s.restore(r)
	for _, f := range s.flights {
		drainSome(r.ctx, f.gens)
		f.pipe.drain(r.ctx)
		if f.batch != nil {
			drain(r.ctx, f.batch.scores)
		}
	}
	s.flights = nil
}

func (s *deepSource) settle(r *rlRun) {
	s.restore(r)
	for _, f := range s.flights {
		if f.pipe != nil {
			f.pipe.drain(r.ctx)
			continue
		}
		if f.err == nil {
			f.err = s.await(r, f)
		}
		if f.batch != nil {
			drain(r.ctx, f.batch.scores)
		}
	}
}

func (s *deepSource) carry(r *rlRun) error {
	s.restore(r)
	var out []AsyncFlight
	for _, f := range s.flights {
		if f.pipe != nil {
			b, err := f.pipe.wait(r.ctx)
			if err != nil {
				return err
			}
			drain(r.ctx, b.scores) // redone by the next run (the same verdicts)
			f.Shards = b.gens
		} else if err := s.await(r, f); err != nil {
			return err
		}
		if f.batch != nil {
			drain(r.ctx, f.batch.scores)
		}
		out = append(out, f.AsyncFlight)
	}
	r.st.Flights = out
	return nil
}

// drainSome is drain over futures of which some are nil (shards not called).
func drainSome(ctx workflow.Context, futs []workflow.Future) {
	for _, f := range futs {
		if f != nil {
			_ = f.Get(ctx, nil)
		}
	}
}
