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

	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/rollout"
)

// streamedStep is PolicyStep for an iteration given by reference (in.Shards) and trained in
// minibatches (in.Minibatch > 0): the rollouts are read from the store one minibatch at a time, so
// the step's memory is one minibatch's rows plus a few scalars per sample, whatever the batch.
//
//   - a first pass over the shards keeps each sample's group, reward and length: advantages, dynamic
//     sampling and the reward statistics need nothing else;
//   - a second pass computes every minibatch's old (and reference) log-probs before any update, as
//     the in-memory step does, and spills them to a scratch file;
//   - each epoch streams the minibatches again and takes one optimizer step per minibatch.
//
// Minibatches hold the same rows in the same order as the in-memory step's, so both commit the same
// weights (TestStreamedPolicyStepMatchesInMemory).
func (a *Activities) streamedStep(ctx context.Context, in contract.PolicyStepInput, next int) (contract.PolicyStepOutput, error) {
	light, rewards, lengths, err := a.scanShards(ctx, in)
	if err != nil {
		return contract.PolicyStepOutput{}, err
	}
	adv, err := advantages(in.Loss.Algorithm, light, rewards)
	if err != nil {
		return contract.PolicyStepOutput{}, train.BadInput(err)
	}
	if in.InjectNaN {
		for i := range adv {
			adv[i] = math.NaN()
		}
	}
	metrics := map[string]float64{}
	idx, dropped := keptRows(light, rewards, in.DynamicSampling)
	metrics["groups_dropped"] = float64(dropped)
	rewardStats(metrics, light, rewards)
	var tokens float64
	for _, n := range lengths {
		tokens += float64(n)
	}
	metrics["response_length"] = tokens / float64(len(lengths))

	pol, err := a.Load(ctx, in.Policy, train.LoadOptions{Optim: in.Optim, Optimizer: !in.FreshOptimizer})
	if err != nil {
		return contract.PolicyStepOutput{}, err
	}
	eng, cfg := pol.Engine, pol.Config
	defer eng.Close()
	nonFinite := false
	if len(idx) > 0 {
		var chunks [][]int
		for lo := 0; lo < len(idx); lo += in.Minibatch {
			chunks = append(chunks, idx[lo:min(lo+in.Minibatch, len(idx))])
		}
		scratch, err := a.oldLogProbs(ctx, in, eng, chunks, adv)
		if err != nil {
			return contract.PolicyStepOutput{}, err
		}
		defer scratch.close()
		stream := &shardStream{ctx: ctx, a: a, shards: in.Shards}
		defer stream.close()
		inputs := func(c int) ([]*tensors.Tensor, error) {
			if c == 0 {
				stream.reset() // each epoch reads the shards from the start
			}
			rows, err := stream.rows(chunks[c], adv)
			if err != nil {
				return nil, err
			}
			old, ref, err := scratch.read(c, len(rows.adv), rows.seq)
			if err != nil {
				return nil, err
			}
			return append(rows.inputs(old, ref), tensors.FromFlatDataAndDimensions(rows.adv, len(rows.adv))), nil
		}
		if nonFinite, err = optimizeEpochs(ctx, eng, objective.Policy(in.Loss), inputs, len(chunks), in, metrics); err != nil {
			return contract.PolicyStepOutput{}, err
		}
	}
	return a.commitPolicy(ctx, in, next, cfg, metrics, nonFinite, func(w *ckpt.Writer, st ckpt.State) error {
		return train.WriteModel(ctx, w, pol, st, true)
	})
}

// keptRows returns the samples the policy step trains on, group by group (groups ascending, samples
// in file order): every sample, or with dynamic sampling those of groups whose rewards differ; and
// how many groups were dropped.
func keptRows(rs []rollout.Rollout, rewards []float64, dynamic bool) (idx []int, dropped int) {
	for _, g := range rollout.Groups(rs) {
		same := true
		for _, j := range g[1:] {
			same = same && rewards[j] == rewards[g[0]]
		}
		if dynamic && same {
			dropped++
			continue
		}
		idx = append(idx, g...)
	}
	return idx, dropped
}

// scanShards reads the shards once and keeps, per sample, its group (in a rollout with no other
// field), its reward and its completion length; it fills nothing in in.
func (a *Activities) scanShards(ctx context.Context, in contract.PolicyStepInput) (light []rollout.Rollout, rewards []float64, lengths []int, err error) {
	if len(in.Rewards) > 0 || in.Rollouts != "" {
		return nil, nil, nil, train.BadInput(fmt.Errorf("train: policy step %s/%s: set shards, or rollouts and rewards, not both", in.Run, in.Phase))
	}
	for _, sh := range in.Shards {
		part, err := train.ReadRollouts(ctx, a.Ckpt, sh.Rollouts) // one shard at a time
		if err != nil {
			return nil, nil, nil, err
		}
		scores, err := a.readScores(ctx, sh.Verdicts, part)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := noSegments(part, "streamed policy step", "set minibatch 0"); err != nil {
			return nil, nil, nil, err
		}
		for _, r := range part {
			light = append(light, rollout.Rollout{ID: r.ID, Group: r.Group, Ep: summary(r.Ep)})
			lengths = append(lengths, len(r.Tokens))
		}
		rewards = append(rewards, scores...)
	}
	if len(light) == 0 {
		return nil, nil, nil, train.BadInput(fmt.Errorf("train: policy step %s/%s: no rollouts in %d shards", in.Run, in.Phase, len(in.Shards)))
	}
	return light, rewards, lengths, nil
}

// oldLogProbs computes every minibatch's old log-probs (the policy before any update) and reference
// log-probs (the reference model when the KL term needs one, else the old ones) and spills them.
func (a *Activities) oldLogProbs(ctx context.Context, in contract.PolicyStepInput, eng train.Engine, chunks [][]int, adv []float64) (*logProbScratch, error) {
	var refEng train.Engine
	if in.Loss.KLBeta > 0 && in.Reference != "" && in.Reference != in.Policy {
		ref, err := a.Load(ctx, in.Reference, train.LoadOptions{})
		if err != nil {
			return nil, err
		}
		refEng = ref.Engine
		defer refEng.Close()
	}
	scratch, err := newLogProbScratch()
	if err != nil {
		return nil, err
	}
	stream := &shardStream{ctx: ctx, a: a, shards: in.Shards}
	defer stream.close()
	for _, ch := range chunks {
		rows, err := stream.rows(ch, adv)
		if err == nil {
			var old, ref [][]float32
			if old, err = eng.LogProbs(rows.batch()); err != nil {
				err = fmt.Errorf("train: policy step old log-probs: %w", err)
			} else if ref = old; refEng != nil {
				if ref, err = refEng.LogProbs(rows.batch()); err != nil {
					err = fmt.Errorf("train: policy step: reference log-probs of %s: %w", in.Reference, err)
				}
			}
			if err == nil {
				err = scratch.write(old, ref)
			}
		}
		if err != nil {
			scratch.close()
			return nil, err
		}
	}
	return scratch, nil
}

// shardStream reads an iteration's shards in order, one line at a time.
type shardStream struct {
	ctx    context.Context
	a      *Activities
	shards []ScoredShard
	s      int // shard open (or next to open)
	rc     io.ReadCloser
	sc     *bufio.Scanner
	pos    int // index (across the shards) of the next line
}

func (s *shardStream) close() {
	if s.rc != nil {
		s.rc.Close()
		s.rc, s.sc = nil, nil
	}
}

func (s *shardStream) reset() { s.close(); s.s, s.pos = 0, 0 }

// take returns the rollouts of indices idx (ascending, not before the stream's position).
func (s *shardStream) take(idx []int) ([]rollout.Rollout, error) {
	out := make([]rollout.Rollout, 0, len(idx))
	for _, want := range idx {
		if want < s.pos {
			return nil, fmt.Errorf("train: shard stream: row %d after row %d (rows must ascend)", want, s.pos)
		}
		for {
			if s.sc == nil {
				if s.s >= len(s.shards) {
					return nil, fmt.Errorf("train: shard stream: row %d past the end of %d shards", want, len(s.shards))
				}
				rc, err := s.a.Ckpt.OpenObject(s.ctx, s.shards[s.s].Rollouts)
				if err != nil {
					return nil, fmt.Errorf("train: %w", err)
				}
				s.rc, s.sc = rc, bufio.NewScanner(rc)
				s.sc.Buffer(make([]byte, 64<<10), 64<<20)
			}
			if !s.sc.Scan() {
				if err := s.sc.Err(); err != nil {
					return nil, fmt.Errorf("train: read %s: %w", s.shards[s.s].Rollouts, err)
				}
				s.close()
				s.s++
				continue
			}
			if len(s.sc.Bytes()) == 0 {
				continue
			}
			s.pos++
			if s.pos-1 == want {
				var r rollout.Rollout
				if err := json.Unmarshal(s.sc.Bytes(), &r); err != nil {
					return nil, train.BadInput(fmt.Errorf("rollout: %s: row %d: %w", s.shards[s.s].Rollouts, want, err))
				}
				out = append(out, r)
				break
			}
		}
	}
	return out, nil
}

// rows reads the rollouts idx and builds their objective rows with their advantages.
func (s *shardStream) rows(idx []int, adv []float64) (policyRows, error) {
	rs, err := s.take(idx)
	if err != nil {
		return policyRows{}, err
	}
	local, ladv := make([]int, len(idx)), make([]float64, len(idx))
	for k, i := range idx {
		local[k], ladv[k] = k, adv[i]
	}
	return buildPolicyRows(rs, ladv, local), nil
}

// logProbScratch keeps minibatches' old and reference log-probs in a temporary file.
type logProbScratch struct {
	f       *os.File
	offsets []int64
	end     int64
}

func newLogProbScratch() (*logProbScratch, error) {
	f, err := os.CreateTemp("", "temper-policy-step-*")
	if err != nil {
		return nil, fmt.Errorf("train: policy step scratch: %w", err)
	}
	return &logProbScratch{f: f}, nil
}

func (s *logProbScratch) write(old, ref [][]float32) error {
	var buf []byte
	for _, m := range [][][]float32{old, ref} {
		for _, row := range m {
			for _, v := range row {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
		}
	}
	if _, err := s.f.WriteAt(buf, s.end); err != nil {
		return fmt.Errorf("train: policy step scratch: %w", err)
	}
	s.offsets = append(s.offsets, s.end)
	s.end += int64(len(buf))
	return nil
}

// read returns minibatch c's old and reference log-probs, [rows][seq] each.
func (s *logProbScratch) read(c, rows, seq int) (old, ref [][]float32, err error) {
	buf := make([]byte, 2*rows*seq*4)
	if _, err := s.f.ReadAt(buf, s.offsets[c]); err != nil {
		return nil, nil, fmt.Errorf("train: policy step scratch: minibatch %d: %w", c, err)
	}
	m := make([][][]float32, 2)
	for k := range m {
		m[k] = make([][]float32, rows)
		for r := range rows {
			m[k][r] = make([]float32, seq)
			for t := range seq {
				m[k][r][t] = math.Float32frombits(binary.LittleEndian.Uint32(buf[((k*rows+r)*seq+t)*4:]))
			}
		}
	}
	return m[0], m[1], nil
}

func (s *logProbScratch) close() {
	s.f.Close()
	os.Remove(s.f.Name())
}
