package train

import (
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/tokenize"
)

// SequenceInputs lays token sequences out as objective.SequenceRewards' inputs: tokens and
// positions int32 [rows, seq], valid bool [rows, seq], last int32 [rows], completion float32
// [rows, seq] (1 where completion[r][t] is true, except at t = 0, the BOS). Sequences are
// right-padded with PAD (rows beyond len(seqs) are all padding, last 0); each must be 1..seq long.
// completion[r] (data.Encoded.Loss) may be shorter than seqs[r]; the rest counts as prompt.
func SequenceInputs(seqs [][]int, completion [][]bool, rows, seq int) []*tensors.Tensor {
	tok, pos := make([]int32, rows*seq), make([]int32, rows*seq)
	valid, last := make([]bool, rows*seq), make([]int32, rows)
	comp := make([]float32, rows*seq)
	for r := range rows {
		for t := range seq {
			tok[r*seq+t], pos[r*seq+t] = tokenize.BytePAD, int32(t)
		}
		if r >= len(seqs) {
			continue
		}
		for t, id := range seqs[r] {
			tok[r*seq+t], valid[r*seq+t] = int32(id), true
			if t > 0 && r < len(completion) && t < len(completion[r]) && completion[r][t] {
				comp[r*seq+t] = 1
			}
		}
		last[r] = int32(len(seqs[r]) - 1)
	}
	return []*tensors.Tensor{tensors.FromFlatDataAndDimensions(tok, rows, seq), tensors.FromFlatDataAndDimensions(pos, rows, seq),
		tensors.FromFlatDataAndDimensions(valid, rows, seq), tensors.FromFlatDataAndDimensions(last, rows),
		tensors.FromFlatDataAndDimensions(comp, rows, seq)}
}

func RewardFlag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// I32 packs a [rows][cols] host batch as an int32 tensor (token ids, positions).
func I32(x [][]int) *tensors.Tensor {
	flat := make([]int32, 0, len(x)*len(x[0]))
	for _, row := range x {
		for _, v := range row {
			flat = append(flat, int32(v))
		}
	}
	return tensors.FromFlatDataAndDimensions(flat, len(x), len(x[0]))
}

// F32 packs a [rows][cols] host batch as a float32 tensor.
func F32(x [][]float32) *tensors.Tensor { return pack2D(x) }

// Bools packs a [rows][cols] host batch as a bool tensor (masks).
func Bools(x [][]bool) *tensors.Tensor { return pack2D(x) }

func pack2D[T float32 | bool](x [][]T) *tensors.Tensor {
	flat := make([]T, 0, len(x)*len(x[0]))
	for _, row := range x {
		flat = append(flat, row...)
	}
	return tensors.FromFlatDataAndDimensions(flat, len(x), len(x[0]))
}
