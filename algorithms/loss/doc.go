// Package loss holds Temper's training objectives as GoMLX graph functions: preference losses (DPO, IPO,
// ORPO, SimPO, KTO), policy-gradient losses (GRPO family, GSPO, CISPO, PPO) with the off-policy
// correction of rollouts the trainer did not sample (truncated and masked IS, geometric-mean masks,
// IcePop), and distillation divergences (forward and reverse KL, GKD's β-skewed Jensen–Shannon,
// forward KL against a stored teacher top-k), each with its paper's formula in its doc comment and a
// plain-Go reference in the tests. It also measures the train–inference mismatch (MismatchOf in plain
// Go, MismatchMetrics in a graph).
//
// Conventions shared by every loss here:
//   - inputs are per-token log-probabilities [batch, seq] of the tokens actually present, with a
//     [batch, seq] mask (1 on completion tokens, 0 on prompt and padding); per-sequence quantities are
//     masked sums (SeqSum) or masked means (SeqMean) of them;
//   - a loss returns a scalar to minimise plus named scalar metrics (Metrics) for logging;
//   - graph functions may panic on shape errors (GoMLX's convention); callers in tpu/ recover;
//     host-side functions (MismatchOf) return errors.
package loss
