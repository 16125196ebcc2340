package policy

import (
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tokenize"
)

// policyRows are one minibatch's rows as the policy objectives take them, before the log-probs that
// the pre-update pass reads (objective.PolicyRows without Old and Ref).
type policyRows struct {
	tokens, targets, positions [][]int
	valid                      [][]bool
	mask, behaviour            [][]float32
	adv                        []float32 // sequence-level advantages (zeros with GAE's token-level ones)
	versions                   []int     // the policy version that sampled each row (its rollout's)
	seq                        int
	// cols[r] are row r's completion columns (the t whose target is a completion token), −1 past
	// them; window is their padded count (a multiple of 4, the longest completion's).
	cols   [][]int
	window int
}

// completionWindow is the window of a policy step's rows (objective.PolicyOptions.Window): 0, the whole
// row, unless the completions fit in fewer columns.
func (p policyRows) completionWindow() int {
	if p.window >= p.seq {
		return 0
	}
	return p.window
}

// objective is the rows with the old and reference log-probs of their targets.
func (p policyRows) objective(old, ref [][]float32) objective.PolicyRows {
	return objective.PolicyRows{Tokens: p.tokens, Targets: p.targets, Positions: p.positions, Valid: p.valid, Mask: p.mask,
		Old: old, Behaviour: p.behaviour, Ref: ref}
}

// policyBatch is objective.Policy's batch of the rows; window > 0 adds their completion columns.
func (p policyRows) policyBatch(old, ref [][]float32, window int) objective.PolicyBatch {
	b := objective.PolicyBatch{PolicyRows: p.objective(old, ref), Adv: p.adv}
	if window > 0 {
		b.Cols, b.Window = p.cols, window
	}
	return b
}

// batch is the rows as an engine batch, for the log-probs and values of their targets.
func (p policyRows) batch() data.TokenBatch {
	lm := make([][]float32, len(p.mask))
	copy(lm, p.mask)
	return data.TokenBatch{Tokens: p.tokens, Targets: p.targets, LossMask: lm, Positions: p.positions, Valid: p.valid}
}

// buildPolicyRows lays out the rollouts idx of rs, with their advantages adv[i], as rows of one
// bucketed length.
func buildPolicyRows(rs []rollout.Rollout, adv []float64, idx []int) policyRows {
	longest := 2
	for _, i := range idx {
		longest = max(longest, len(rs[i].PromptTokens)+len(rs[i].Tokens))
	}
	seq := SeqBucket(longest - 1)
	p := policyRows{seq: seq}
	for _, i := range idx {
		r := rs[i]
		full := append(append([]int{}, r.PromptTokens...), r.Tokens...)
		tok, tgt, pos := make([]int, seq), make([]int, seq), make([]int, seq)
		valid, mask, beh := make([]bool, seq), make([]float32, seq), make([]float32, seq)
		var cols []int
		for t := 0; t < seq; t++ {
			pos[t] = t
			tok[t], tgt[t] = tokenize.BytePAD, tokenize.BytePAD
			if t+1 < len(full) {
				tok[t], tgt[t], valid[t] = full[t], full[t+1], true
				// Only the policy's own tokens are trained on: not the prompt, not an episode's tool
				// results (their log-prob is not the policy's).
				if c := t + 1 - len(r.PromptTokens); c >= 0 {
					cols = append(cols, t)
					if r.Trained(c) {
						mask[t], beh[t] = 1, r.LogProbs[c]
					}
				}
			}
		}
		p.cols = append(p.cols, cols)
		p.window = max(p.window, (len(cols)+3)/4*4)
		p.tokens, p.targets, p.positions = append(p.tokens, tok), append(p.targets, tgt), append(p.positions, pos)
		p.valid, p.mask, p.behaviour = append(p.valid, valid), append(p.mask, mask), append(p.behaviour, beh)
		p.adv = append(p.adv, float32(adv[i]))
		p.versions = append(p.versions, r.PolicyVersion)
	}
	return p
}

// SeqBucket is the padded length of n positions: the smallest of 8, 10, 12, 14, 16, 20, 24, 28, 32,
// 40, … (four buckets an octave) that holds n. Buckets bound recompilation (one compiled step a
// bucket; an RL phase's rows keep the same longest length from one iteration to the next) while
// padding at most a quarter of a row: the policy step's time is proportional to the padded length,
// and powers of two alone padded an add2 rollout's 10 positions to 16.
func SeqBucket(n int) int {
	for b := 8; ; b *= 2 {
		for _, q := range []int{b, b + b/4, b + b/2, b + 3*b/4} {
			if n <= q {
				return q
			}
		}
	}
}
