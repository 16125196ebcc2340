package policy

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// scanShards reads the shards once and keeps, per sample, its group (in a rollout with no other
// field), its reward and its completion length; it fills nothing in in.
func (a *Activities) scanShards(ctx context.Context, in trainapi.PolicyStepInput) (light []rollout.Rollout, rewards []float64, lengths []int, err error) {
	if len(in.Rewards) > 0 || in.Rollouts != "" {
		return nil, nil, nil, train.BadInput(fmt.Errorf("train: policy step %s/%s: set shards, or rollouts and rewards, not both", in.Run, in.Phase))
	}
	for _, sh := range in.Shards {
		part, err := train.ReadRollouts(ctx, a.Ckpt, sh.Rollouts) // one shard at a time
		if err != nil {
			return nil, nil, nil, err
		}
		scores, err := train.ReadScores(ctx, a.Ckpt, sh.Verdicts, part)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, r := range part {
			// The versions and mask stay for the staleness histogram (stalenessStats); the number
			// of an agent's further segments for their rows (segmentRefs).
			var segs []rollout.Segment
			if len(r.Segments) > 0 {
				segs = make([]rollout.Segment, len(r.Segments))
			}
			light = append(light, rollout.Rollout{ID: r.ID, Group: r.Group, Ep: summary(r.Ep), PolicyVersion: r.PolicyVersion, Versions: r.Versions, Policy: r.Policy,
				Segments: segs})
			lengths = append(lengths, len(r.Tokens))
		}
		rewards = append(rewards, scores...)
	}
	if len(light) == 0 {
		return nil, nil, nil, train.BadInput(fmt.Errorf("train: policy step %s/%s: no rollouts in %d shards", in.Run, in.Phase, len(in.Shards)))
	}
	return light, rewards, lengths, nil
}

// shardStream reads an iteration's shards in order, one line at a time.
type shardStream struct {
	ctx    context.Context
	a      *Activities
	shards []trainapi.ScoredShard
	s      int // shard open (or next to open)
	rc     io.ReadCloser
	sc     *bufio.Scanner
	pos    int // index (across the shards) of the next line
	// last is the rollout of line pos-1 once read: an episode's segments are rows after its own,
	// perhaps in the next minibatch.
	last    rollout.Rollout
	hasLast bool
}

func (s *shardStream) close() {
	if s.rc != nil {
		s.rc.Close()
		s.rc, s.sc = nil, nil
	}
}

func (s *shardStream) reset() {
	s.close()
	s.s, s.pos, s.last, s.hasLast = 0, 0, rollout.Rollout{}, false
}

// take returns the rollout of index want (ascending from call to call: the last one read, or one
// past the stream's position).
func (s *shardStream) take(want int) (rollout.Rollout, error) {
	if s.hasLast && want == s.pos-1 {
		return s.last, nil
	}
	if want < s.pos {
		return rollout.Rollout{}, fmt.Errorf("train: shard stream: row %d after row %d (rows must ascend)", want, s.pos)
	}
	for {
		if s.sc == nil {
			if s.s >= len(s.shards) {
				return rollout.Rollout{}, fmt.Errorf("train: shard stream: row %d past the end of %d shards", want, len(s.shards))
			}
			rc, err := s.a.Ckpt.OpenObject(s.ctx, s.shards[s.s].Rollouts)
			if err != nil {
				return rollout.Rollout{}, fmt.Errorf("train: %w", err)
			}
			s.rc, s.sc = rc, bufio.NewScanner(rc)
			s.sc.Buffer(make([]byte, 64<<10), 64<<20)
		}
		if !s.sc.Scan() {
			if err := s.sc.Err(); err != nil {
				return rollout.Rollout{}, fmt.Errorf("train: read %s: %w", s.shards[s.s].Rollouts, err)
			}
			s.close()
			s.s++
			continue
		}
		if len(s.sc.Bytes()) == 0 {
			continue
		}
		s.pos++
		s.hasLast = false
		if s.pos-1 == want {
			var r rollout.Rollout
			if err := json.Unmarshal(s.sc.Bytes(), &r); err != nil {
				return rollout.Rollout{}, train.BadInput(fmt.Errorf("rollout: %s: row %d: %w", s.shards[s.s].Rollouts, want, err))
			}
			s.last, s.hasLast = r, true
			return r, nil
		}
	}
}

// rows reads the rows refs (an agent's further segment from its episode's rollout, segmentRow)
// and builds their objective rows with their advantages adv, one per row.
func (s *shardStream) rows(refs []rowRef, adv []float64) (policyRows, error) {
	rs, local := make([]rollout.Rollout, len(refs)), make([]int, len(refs))
	for k, ref := range refs {
		r, err := s.take(ref.i)
		if err != nil {
			return policyRows{}, err
		}
		if ref.seg > 0 {
			if ref.seg > len(r.Segments) {
				return policyRows{}, train.BadInput(fmt.Errorf("train: shard stream: rollout %s (row %d) has %d further segments, fewer than its scan counted", r.ID, ref.i, len(r.Segments)))
			}
			r = segmentRow(r, r.Segments[ref.seg-1])
		}
		rs[k], local[k] = r, k
	}
	return buildPolicyRows(rs, adv, local), nil
}

// logProbScratch keeps minibatches' pre-update log-probs (and values) in a temporary file.
type logProbScratch struct {
	f       *os.File
	offsets []int64
	counts  []int // matrices stored per minibatch
	end     int64
}

func newLogProbScratch() (*logProbScratch, error) {
	f, err := os.CreateTemp("", "temper-policy-step-*")
	if err != nil {
		return nil, fmt.Errorf("train: policy step scratch: %w", err)
	}
	return &logProbScratch{f: f}, nil
}

// write appends the next minibatch's matrices.
func (s *logProbScratch) write(p prepared) error {
	var buf []byte
	ms := p.matrices()
	for _, m := range ms {
		for _, row := range m {
			for _, v := range row {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
		}
	}
	if _, err := s.f.WriteAt(buf, s.end); err != nil {
		return fmt.Errorf("train: policy step scratch: %w", err)
	}
	s.offsets, s.counts = append(s.offsets, s.end), append(s.counts, len(ms))
	s.end += int64(len(buf))
	return nil
}

// read returns minibatch c's matrices, [rows][seq] each.
func (s *logProbScratch) read(c, rows, seq int) (prepared, error) {
	if c >= len(s.offsets) {
		return prepared{}, fmt.Errorf("train: policy step scratch: minibatch %d of %d", c, len(s.offsets))
	}
	buf := make([]byte, s.counts[c]*rows*seq*4)
	if _, err := s.f.ReadAt(buf, s.offsets[c]); err != nil {
		return prepared{}, fmt.Errorf("train: policy step scratch: minibatch %d: %w", c, err)
	}
	m := make([][][]float32, s.counts[c])
	for k := range m {
		m[k] = make([][]float32, rows)
		for r := range rows {
			m[k][r] = make([]float32, seq)
			for t := range seq {
				m[k][r][t] = math.Float32frombits(binary.LittleEndian.Uint32(buf[((k*rows+r)*seq+t)*4:]))
			}
		}
	}
	return preparedOf(m), nil
}

func (s *logProbScratch) close() {
	s.f.Close()
	os.Remove(s.f.Name())
}
