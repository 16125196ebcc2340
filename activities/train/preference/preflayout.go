package preference

import (
	"context"
	"fmt"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/tokenize"
)

// encodedItem holds an item's two sequences as token ids with their trained-token flags.
type encodedItem [2]data.Encoded

// encodeItems encodes every item's two sequences; a sequence longer than maxSeq (when > 0) is an error
// naming the example.
func encodeItems(enc data.Encoder, items []prefItem, maxSeq int) ([]encodedItem, error) {
	out := make([]encodedItem, len(items))
	for i, it := range items {
		for s, c := range it.texts() {
			e, err := enc.Encode(it.Ex.AsExample(c))
			if err != nil {
				return nil, fmt.Errorf("train: encode preference example %d (%q): %w", i+1, it.Ex.ID, err)
			}
			if maxSeq > 0 && len(e.IDs) > maxSeq {
				return nil, fmt.Errorf("train: preference example %d (%q) has %d tokens, more than batch.seq %d: raise batch.seq", i+1, it.Ex.ID, len(e.IDs), maxSeq)
			}
			out[i][s] = e
		}
	}
	return out, nil
}

// prefSide is one side of a batch, one sequence per row, right-padded to seq (see objective.PrefSide):
// mask[r][t] is 1 when token t+1 of row r is a trained completion token.
type prefSide struct {
	tokens, positions [][]int
	valid             [][]bool
	mask              [][]float32
}

// layoutSide lays out sequences as rows of seq tokens.
func layoutSide(seqs []data.Encoded, seq int) prefSide {
	var s prefSide
	for _, e := range seqs {
		tok, pos := make([]int, seq), make([]int, seq)
		valid, mask := make([]bool, seq), make([]float32, seq)
		for t := 0; t < seq; t++ {
			pos[t], tok[t] = t, tokenize.BytePAD
			if t < len(e.IDs) {
				tok[t], valid[t] = e.IDs[t], true
			}
			if t+1 < len(e.IDs) && e.Loss[t+1] {
				mask[t] = 1
			}
		}
		s.tokens, s.positions = append(s.tokens, tok), append(s.positions, pos)
		s.valid, s.mask = append(s.valid, valid), append(s.mask, mask)
	}
	return s
}

// longest is the length of the longest sequence, at least 2.
func longest(seqs []data.Encoded) int {
	n := 2
	for _, e := range seqs {
		n = max(n, len(e.IDs))
	}
	return n
}

// batch is the side as an engine batch for LogProbs: Targets[r][t] = tokens[r][t+1].
func (s prefSide) batch() data.TokenBatch {
	b := data.TokenBatch{Tokens: s.tokens, LossMask: s.mask, Positions: s.positions, Valid: s.valid}
	for _, row := range s.tokens {
		tgt := make([]int, len(row))
		copy(tgt, row[1:])
		tgt[len(row)-1] = tokenize.BytePAD
		b.Targets = append(b.Targets, tgt)
	}
	return b
}

// objective is the side as one side of an objective's batch.
func (s prefSide) objective() objective.PrefSide {
	return objective.PrefSide{Tokens: s.tokens, Positions: s.positions, Valid: s.valid, Mask: s.mask}
}

// counted returns the values of lp at the side's counted positions, row by row.
func (s prefSide) counted(lp [][]float32) [][]float32 {
	out := make([][]float32, len(s.mask))
	for r, m := range s.mask {
		for t, w := range m {
			if w != 0 {
				out[r] = append(out[r], lp[r][t])
			}
		}
	}
	return out
}

// scatter places each row's counted values at its counted positions: the inverse of counted, zeros
// elsewhere. A row whose count differs is an error (the reference object does not match the data).
func (s prefSide) scatter(vals [][]float32) ([][]float32, error) {
	out := make([][]float32, len(s.mask))
	for r, m := range s.mask {
		out[r] = make([]float32, len(m))
		k := 0
		for t, w := range m {
			if w != 0 {
				if k >= len(vals[r]) {
					return nil, fmt.Errorf("row %d: %d reference log-probs for more counted tokens", r, len(vals[r]))
				}
				out[r][t] = vals[r][k]
				k++
			}
		}
		if k != len(vals[r]) {
			return nil, fmt.Errorf("row %d: %d reference log-probs for %d counted tokens", r, len(vals[r]), k)
		}
	}
	return out, nil
}

// masked zeroes lp outside the side's counted positions.
func (s prefSide) masked(lp [][]float32) [][]float32 {
	out := make([][]float32, len(lp))
	for r := range lp {
		out[r] = make([]float32, len(lp[r]))
		for t, w := range s.mask[r] {
			if w != 0 {
				out[r][t] = lp[r][t]
			}
		}
	}
	return out
}

// seqLogProbs returns, for each item, the model's log-probs of the counted tokens of its two sequences
// (each sequence scored on its own row, batches of train.EvalRows), heartbeating progress.
func seqLogProbs(ctx context.Context, eng train.Scorer, enc []encodedItem, beat func(n int)) ([][2][]float32, error) {
	out := make([][2][]float32, len(enc))
	for lo := 0; lo < len(enc); lo += train.EvalRows {
		hi := min(lo+train.EvalRows, len(enc))
		for s := 0; s < 2; s++ {
			seqs := make([]data.Encoded, 0, hi-lo)
			for _, e := range enc[lo:hi] {
				seqs = append(seqs, e[s])
			}
			side := layoutSide(seqs, longest(seqs))
			lp, err := eng.LogProbs(side.batch())
			if err != nil {
				return nil, err
			}
			for r, v := range side.counted(lp) {
				out[lo+r][s] = v
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if beat != nil {
			beat(hi - lo)
		}
	}
	return out, nil
}
