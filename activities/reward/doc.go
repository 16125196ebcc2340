// Package reward holds the reward activities: reward.Score judges rollouts with a composed
// verifier spec (algorithms/verify) and returns per-item verdicts and per-verifier mean scores.
//
// Contract:
//   - Score runs items on a bounded worker pool, each under its own timeout, heartbeating
//     Progress{Step, Total} about once a second; a retry rescores everything (idempotent).
//   - Score takes items inline or a rollouts URI, read through the worker's ckpt.Client. With
//     write_verdicts (what RL workflows use) it writes the verdicts beside the rollouts object
//     (VerdictsURI) and returns counts, means and the first failures only, so nothing per sample
//     travels in workflow history and a rollouts object of any size can be scored; inline verdicts
//     are bounded by MaxItems.
//   - Bad input (unknown verifier, bad params) is a non-retryable "InvalidInput" error naming
//     the field; an item that cannot be judged (bad reference, timeout, sandbox failure, panic)
//     gets ItemVerdict.Error and is left out of the means, never failing the batch.
//   - "code" runs programs in the sandbox subpackage (Python 3, Go); it is registered on every
//     Activities and explains itself when the worker has no sandbox.
//   - "critic" with render: layout draws a layout completion (algorithms/layoutrender) and scores
//     the picture with a vision reward model; a layout that cannot be drawn gets the layout
//     verifier's feedback and no model call.
//   - Only go.temporal.io/sdk/activity and sdk/temporal are used from Temporal; ScoreItems is
//     the same logic without Temporal.
package reward
