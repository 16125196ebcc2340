package train

import (
	"fmt"
	"math"
	"slices"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/tasks"
)

// StepRow is one solution as a process reward model reads it: the tokens (the prompt's ids, then
// every step followed by its newline), the position of each step's newline, and the steps' labels.
// Start is the first step's first token (the prompt's length; a search path's last step: where that
// step begins): the generative term of a PRM (objective.StepLogProbs) counts tokens from there.
type StepRow struct {
	IDs    []int
	Ends   []int
	Labels []bool
	Start  int
}

// StepSequence encodes a prompt and its steps as a process reward model reads them (prompt ids as
// enc.PromptIDs writes them, then each step and "\n"; ends[i] is step i's newline). A search
// node's path of line steps is the same tokens, so the PRM scores a new step on its path alone.
func StepSequence(enc data.Encoder, prompt string, steps []string) (ids, ends []int, err error) {
	if ids, err = enc.PromptIDs(tasks.Example{Prompt: prompt}); err != nil {
		return nil, nil, fmt.Errorf("train: encode steps of %q: %w", prompt, err)
	}
	for _, s := range steps {
		ids = append(ids, enc.Tok.Encode(s+"\n")...)
		ends = append(ends, len(ids)-1)
	}
	return ids, ends, nil
}

// PathStepRow is a search node's path as the PRM scores its last step: prompt and path (the steps'
// tokens, each line step ending with newline), the one step ending at the last token and starting
// after the newline before it (or at the path's start), so its score equals that step's in the whole
// solution (StepRows). A row over maxSeq tokens keeps its last maxSeq (the end is what is scored).
func PathStepRow(prompt, path, newline []int, maxSeq int) StepRow {
	ids := append(append([]int(nil), prompt...), path...)
	start := len(prompt) + lastStepStart(path, newline)
	if len(ids) > maxSeq {
		cut := len(ids) - maxSeq
		ids, start = ids[cut:], max(start-cut, 0)
	}
	return StepRow{IDs: ids, Ends: []int{len(ids) - 1}, Start: start}
}

// lastStepStart is where path's last step begins: after the last newline before its final token
// (the step's own newline), or 0 for a path of one step.
func lastStepStart(path, newline []int) int {
	n := len(newline)
	if n == 0 {
		return 0
	}
	for i := len(path) - 1 - n; i >= 0; i-- {
		if slices.Equal(path[i:i+n], newline) {
			return i + n
		}
	}
	return 0
}

// StepRows encodes step-labelled solutions, keeping the first maxSteps steps that end within maxSeq
// tokens (a solution none of whose steps fit is an error naming it: raise max_seq).
func StepRows(exs []tasks.StepExample, maxSeq, maxSteps int) ([]StepRow, error) {
	enc := Encoder()
	out := make([]StepRow, len(exs))
	for i, ex := range exs {
		ids, ends, err := StepSequence(enc, ex.Prompt, ex.Steps)
		if err != nil {
			return nil, BadInput(err)
		}
		n := 0
		for n < len(ends) && n < maxSteps && ends[n] < maxSeq {
			n++
		}
		if n == 0 {
			return nil, BadInput(fmt.Errorf("train: step-labelled solution %d (%s): its first step ends at token %d, batch.max_seq is %d: raise max_seq", i, ex.ID, ends[0]+1, maxSeq))
		}
		labels := ex.Labels
		if labels != nil { // unlabelled (the prm verifier's rows) stays nil: nil[:n] panics
			labels = labels[:n]
		}
		start := ends[0] + 1 - len(enc.Tok.Encode(ex.Steps[0]+"\n"))
		out[i] = StepRow{IDs: ids[:ends[n-1]+1], Ends: ends[:n], Labels: labels, Start: start}
	}
	return out, nil
}

// StepBatch is objective.PRM's (and PRMScores') batch of rows, padded to nRows rows and steps
// steps (padding has weight 0) and to the next power of two of the longest row, at most maxSeq. The
// completion mask is 1 from each row's Start on (the tokens the generative term counts).
func StepBatch(rows []StepRow, nRows, steps, maxSeq int) objective.StepBatch {
	longest := 1
	seqs := make([][]int, len(rows))
	steps1 := make([][]bool, len(rows))
	for r, row := range rows {
		longest = max(longest, len(row.IDs))
		seqs[r] = row.IDs
		steps1[r] = make([]bool, len(row.IDs))
		for t := max(row.Start, 0); t < len(row.IDs); t++ {
			steps1[r][t] = true
		}
	}
	seq := PadSeq(longest, maxSeq)
	b := objective.StepBatch{Seq: SequenceInputs(seqs, steps1, nRows, seq), Ends: make([][]int, nRows), Labels: Zeros(nRows, steps), Weight: Zeros(nRows, steps)}
	for r := range nRows {
		b.Ends[r] = make([]int, steps)
		if r >= len(rows) {
			continue
		}
		for s, e := range rows[r].Ends {
			b.Ends[r][s], b.Weight[r][s] = e, 1
			if rows[r].Labels != nil && rows[r].Labels[s] {
				b.Labels[r][s] = 1
			}
		}
	}
	return b
}

// PadSeq is the padded length of a batch whose longest sequence has n tokens: the next power of two
// from 8, capped at maxSeq (few shapes, so few compilations).
func PadSeq(n, maxSeq int) int {
	s := 8
	for s < n {
		s *= 2
	}
	return min(s, maxSeq)
}

// ScoreSteps runs a process reward model over rows, evalRows at a time (objective.PRMScores), and
// returns σ(logit) of every row's steps; progress is called with the rows done so far (nil: none).
func ScoreSteps(eng Engine, rows []StepRow, evalRows, steps, maxSeq int, progress func(done int)) ([][]float64, error) {
	obj := objective.PRMScores(evalRows, steps)
	out := make([][]float64, len(rows))
	for lo := 0; lo < len(rows); lo += evalRows {
		hi := min(lo+evalRows, len(rows))
		m, err := eng.EvalObjective(obj, StepBatch(rows[lo:hi], evalRows, steps, maxSeq))
		if err != nil {
			return nil, err
		}
		for r := lo; r < hi; r++ {
			out[r] = make([]float64, len(rows[r].Ends))
			for s := range out[r] {
				out[r][s] = float64(m[objective.PRMScoreKey(r-lo, s)])
			}
		}
		if progress != nil {
			progress(hi)
		}
	}
	return out, nil
}

// LogClamp is log p with p kept above 1e-12 (a confident wrong score costs 27.6, not +Inf).
func LogClamp(p float64) float64 { return math.Log(max(p, 1e-12)) }
