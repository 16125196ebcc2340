package train

import (
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/tokenize"
)

// SequenceInputs lays token sequences out as a reward model scores them (objective.Sequences): rows
// rows of seq tokens, right-padded with PAD (rows beyond len(seqs) are all padding, last 0), each
// sequence 1..seq long; Completion is 1 where completion[r][t] is true, except at t = 0 (the BOS).
// completion[r] (data.Encoded.Loss) may be shorter than seqs[r]; the rest counts as prompt.
func SequenceInputs(seqs [][]int, completion [][]bool, rows, seq int) objective.Sequences {
	s := objective.Sequences{Tokens: make([][]int, rows), Positions: make([][]int, rows), Valid: make([][]bool, rows),
		Last: make([]int, rows), Completion: Zeros(rows, seq)}
	for r := range rows {
		s.Tokens[r], s.Positions[r], s.Valid[r] = make([]int, seq), make([]int, seq), make([]bool, seq)
		for t := range seq {
			s.Tokens[r][t], s.Positions[r][t] = tokenize.BytePAD, t
		}
		if r >= len(seqs) {
			continue
		}
		for t, id := range seqs[r] {
			s.Tokens[r][t], s.Valid[r][t] = id, true
			if t > 0 && r < len(completion) && t < len(completion[r]) && completion[r][t] {
				s.Completion[r][t] = 1
			}
		}
		s.Last[r] = len(seqs[r]) - 1
	}
	return s
}

func RewardFlag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
