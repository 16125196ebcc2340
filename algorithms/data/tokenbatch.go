package data

// TokenBatch is one [rows, seq] batch of host data, the one batch type of the trainer and the
// accelerator runtime: every row has the same length. Targets[r][t] is the token to predict after
// Tokens[r][t]; LossMask weighs it; Valid marks tokens attention may see.
type TokenBatch struct {
	// Tokens are the model inputs.
	Tokens [][]int `json:"tokens"`
	// Targets are aligned with Tokens: Targets[b][t] is the token to predict after Tokens[b][t]
	// (tpu.LMBatch shifts sequences for you). Required by TrainStep, EvalLoss and LogProbs.
	Targets [][]int `json:"targets,omitempty"`
	// LossMask weighs each target (1 counts, 0 ignores); nil counts every target. The loss is the
	// weighted mean over the batch.
	LossMask [][]float32 `json:"loss_mask,omitempty"`
	// Positions are the RoPE positions; nil means 0..seq-1 on every row (right padding).
	Positions [][]int `json:"positions,omitempty"`
	// Valid marks the keys attention may see (false on left padding); nil means all valid.
	Valid [][]bool `json:"valid,omitempty"`
}

// Dims returns the batch size and the sequence length of the first row.
func (b TokenBatch) Dims() (batch, seq int) {
	if len(b.Tokens) == 0 {
		return 0, 0
	}
	return len(b.Tokens), len(b.Tokens[0])
}
