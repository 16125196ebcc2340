package policy

import (
	"context"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// prepared is what the pre-update pass reads of one minibatch, [rows][seq] each: the policy's
// log-probs of the targets (π_old), the reference's (π_ref; the old ones when no KL term needs a
// separate reference) and, with a critic, its values V_old.
type prepared struct{ old, ref, values [][]float32 }

func (p prepared) matrices() [][][]float32 {
	if p.values == nil {
		return [][][]float32{p.old, p.ref}
	}
	return [][][]float32{p.old, p.ref, p.values}
}

func preparedOf(m [][][]float32) prepared {
	p := prepared{old: m[0], ref: m[1]}
	if len(m) > 2 {
		p.values = m[2]
	}
	return p
}

// rowSource holds a step's minibatches: their rows, and what the pre-update pass read of each. A
// pass over the minibatches asks for rows 0, 1, … in order (a stream reads its shards forward).
type rowSource interface {
	rows(c int) (policyRows, error)
	keep(c int, p prepared) error // called once per minibatch, in order
	kept(c int, rows policyRows) (prepared, error)
	close()
}

// memoryRows are minibatches built once from rollouts held in memory.
type memoryRows struct {
	built []policyRows
	pre   []prepared
}

func newMemoryRows(rs []rollout.Rollout, adv []float64, chunks [][]int) *memoryRows {
	m := &memoryRows{built: make([]policyRows, len(chunks)), pre: make([]prepared, len(chunks))}
	for c, ch := range chunks {
		m.built[c] = buildPolicyRows(rs, adv, ch)
	}
	return m
}

func (m *memoryRows) rows(c int) (policyRows, error)             { return m.built[c], nil }
func (m *memoryRows) keep(c int, p prepared) error               { m.pre[c] = p; return nil }
func (m *memoryRows) kept(c int, _ policyRows) (prepared, error) { return m.pre[c], nil }
func (m *memoryRows) close()                                     {}

// streamRows are minibatches read from the iteration's shards each time they are needed, their
// pre-update log-probs spilled to a scratch file: the step holds one minibatch's rows, whatever the
// batch.
type streamRows struct {
	stream  *shardStream
	chunks  [][]int   // indices of refs
	refs    []rowRef  // the rows, in order (segmentRefs)
	adv     []float64 // per row
	scratch *logProbScratch
}

func (a *Activities) newStreamRows(ctx context.Context, shards []trainapi.ScoredShard, refs []rowRef, adv []float64, chunks [][]int) (*streamRows, error) {
	scratch, err := newLogProbScratch()
	if err != nil {
		return nil, err
	}
	return &streamRows{stream: &shardStream{ctx: ctx, a: a, shards: shards}, chunks: chunks, refs: refs, adv: adv, scratch: scratch}, nil
}

func (s *streamRows) rows(c int) (policyRows, error) {
	if c == 0 {
		s.stream.reset() // each pass reads the shards from the start
	}
	ch := s.chunks[c]
	refs, adv := make([]rowRef, len(ch)), make([]float64, len(ch))
	for k, j := range ch {
		refs[k], adv[k] = s.refs[j], s.adv[j]
	}
	return s.stream.rows(refs, adv)
}

func (s *streamRows) keep(_ int, p prepared) error { return s.scratch.write(p) }

func (s *streamRows) kept(c int, rows policyRows) (prepared, error) {
	return s.scratch.read(c, len(rows.tokens), rows.seq)
}

func (s *streamRows) close() {
	s.stream.close()
	s.scratch.close()
}
