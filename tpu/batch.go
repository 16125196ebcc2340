package tpu

import (
	"fmt"

	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
)

// LMBatch builds a next-token batch from sequences: Tokens = s[:n-1], Targets = s[1:], right-padded
// to the longest sequence. The loss counts the targets at index >= promptLens[i] of sequence i (its
// completion); promptLens nil counts every target. Sequences need at least two tokens.
func LMBatch(seqs [][]int, promptLens []int) (data.TokenBatch, error) {
	if len(seqs) == 0 {
		return data.TokenBatch{}, fmt.Errorf("tpu: lm batch: no sequences")
	}
	if promptLens != nil && len(promptLens) != len(seqs) {
		return data.TokenBatch{}, fmt.Errorf("tpu: lm batch: %d prompt lengths for %d sequences", len(promptLens), len(seqs))
	}
	seq := 0
	for i, s := range seqs {
		if len(s) < 2 {
			return data.TokenBatch{}, fmt.Errorf("tpu: lm batch: sequence %d has %d tokens, need >= 2", i, len(s))
		}
		seq = max(seq, len(s)-1)
	}
	b := data.TokenBatch{}
	for i, s := range seqs {
		tok, tgt := make([]int, seq), make([]int, seq)
		mask, pos, valid := make([]float32, seq), make([]int, seq), make([]bool, seq)
		from := 0
		if promptLens != nil {
			from = promptLens[i]
		}
		for t := range len(s) - 1 {
			tok[t], tgt[t], pos[t], valid[t] = s[t], s[t+1], t, true
			if t+1 >= from {
				mask[t] = 1
			}
		}
		b.Tokens, b.Targets = append(b.Tokens, tok), append(b.Targets, tgt)
		b.LossMask, b.Positions, b.Valid = append(b.LossMask, mask), append(b.Positions, pos), append(b.Valid, valid)
	}
	return b, nil
}

// padded is a batch converted to flat int32/float32/bool data of its bucket [pb, pt].
type padded struct {
	b, t, pb, pt int
	tok, tgt     []int32
	pos          []int32
	mask         []float32
	valid        []bool
	counted      int // targets with a non-zero loss weight
}

// pad validates b and lays it out in its bucket; padded rows and columns have loss weight 0 and
// are invalid keys.
func (r *Runtime) pad(b data.TokenBatch, needTargets bool) (padded, error) {
	cfg := r.cfg
	n, seq := b.Dims()
	if n == 0 || seq == 0 {
		return padded{}, fmt.Errorf("empty batch (%d rows of %d tokens)", n, seq)
	}
	if seq > cfg.MaxSeq {
		return padded{}, fmt.Errorf("sequence length %d exceeds max_seq %d: %w", seq, cfg.MaxSeq, model.ErrTooLong)
	}
	if needTargets && b.Targets == nil {
		return padded{}, fmt.Errorf("batch has no targets")
	}
	check := func(name string, rows int, rowLen func(int) int) error {
		if rows != n {
			return fmt.Errorf("%s has %d rows, tokens have %d", name, rows, n)
		}
		for i := range rows {
			if l := rowLen(i); l != seq {
				return fmt.Errorf("%s row %d has %d entries, want %d", name, i, l, seq)
			}
		}
		return nil
	}
	if err := check("tokens", len(b.Tokens), func(i int) int { return len(b.Tokens[i]) }); err != nil {
		return padded{}, err
	}
	if b.Targets != nil {
		if err := check("targets", len(b.Targets), func(i int) int { return len(b.Targets[i]) }); err != nil {
			return padded{}, err
		}
	}
	if b.LossMask != nil {
		if err := check("loss_mask", len(b.LossMask), func(i int) int { return len(b.LossMask[i]) }); err != nil {
			return padded{}, err
		}
	}
	if b.Positions != nil {
		if err := check("positions", len(b.Positions), func(i int) int { return len(b.Positions[i]) }); err != nil {
			return padded{}, err
		}
	}
	if b.Valid != nil {
		if err := check("valid", len(b.Valid), func(i int) int { return len(b.Valid[i]) }); err != nil {
			return padded{}, err
		}
	}
	pb, err := r.opts.Buckets.batchBucket(n)
	if err != nil {
		return padded{}, err
	}
	pt, err := r.opts.Buckets.seqBucket(seq)
	if err != nil {
		return padded{}, err
	}
	p := padded{b: n, t: seq, pb: pb, pt: pt,
		tok: make([]int32, pb*pt), tgt: make([]int32, pb*pt), pos: make([]int32, pb*pt),
		mask: make([]float32, pb*pt), valid: make([]bool, pb*pt)}
	for i := range n {
		for j := range seq {
			k := i*pt + j
			tok := b.Tokens[i][j]
			if tok < 0 || tok >= cfg.Vocab {
				return padded{}, fmt.Errorf("token %d at [%d,%d] outside vocab %d", tok, i, j, cfg.Vocab)
			}
			p.tok[k] = int32(tok)
			if b.Targets != nil {
				tgt := b.Targets[i][j]
				if tgt < 0 || tgt >= cfg.Vocab {
					return padded{}, fmt.Errorf("target %d at [%d,%d] outside vocab %d", tgt, i, j, cfg.Vocab)
				}
				p.tgt[k] = int32(tgt)
				p.mask[k] = 1
				if b.LossMask != nil {
					p.mask[k] = b.LossMask[i][j]
				}
				if p.mask[k] != 0 {
					p.counted++
				}
			}
			p.pos[k] = int32(j)
			if b.Positions != nil {
				if b.Positions[i][j] < 0 {
					return padded{}, fmt.Errorf("position %d at [%d,%d] is negative", b.Positions[i][j], i, j)
				}
				p.pos[k] = int32(b.Positions[i][j])
			}
			p.valid[k] = b.Valid == nil || b.Valid[i][j]
		}
	}
	return p, nil
}

func (p padded) shape() string { return fmt.Sprintf("%dx%d", p.pb, p.pt) }

func (p padded) tokens() *tensors.Tensor { return tensors.FromFlatDataAndDimensions(p.tok, p.pb, p.pt) }
func (p padded) targets() *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(p.tgt, p.pb, p.pt)
}
func (p padded) positions() *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(p.pos, p.pb, p.pt)
}
func (p padded) lossMask() *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(p.mask, p.pb, p.pt)
}
func (p padded) validMask() *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(p.valid, p.pb, p.pt)
}

// flops returns the model FLOPs of training (or of a forward pass) on the real tokens.
func (p padded) flops(cfg model.Config, train bool) float64 {
	if train {
		return float64(p.b*p.t) * cfg.TrainFLOPsPerToken(p.t)
	}
	return float64(p.b*p.t) * cfg.ForwardFLOPsPerToken((p.t+1)/2)
}
