// Package contract is the reward role's side of the contract with workflows: the activity name
// (reward.Score), its input and output structs and the per-call item bound. It imports no GoMLX
// and no storage client, so workflows import it instead of package reward; the JSON field names
// are part of the contract (histories of runs in flight hold them) and must not change.
package contract

import (
	"encoding/json"

	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
)

// ScoreName is the activity that scores rollouts, registered on the "reward" queue.
const ScoreName = "reward.Score"

// MaxItems bounds one ScoreInput: items travel in the Temporal payload until the rollouts store
// exists, and payloads must stay far below 2 MB (callers must also keep completions short).
const MaxItems = 1024

// Item is one rollout to score.
type Item struct {
	ID         string `json:"id"`
	Prompt     string `json:"prompt,omitempty"`
	Completion string `json:"completion"`
	// Reference is the task's truth, a JSON object (see verify.Sample).
	Reference json.RawMessage `json:"reference,omitempty"`
}

// ScoreInput asks for every item to be judged by the composed verifiers of Spec.
type ScoreInput struct {
	// Rollouts is the URI of a rollouts object (what RL workflows pass); Items carries the samples
	// inline instead (tools and tests). Set one.
	Rollouts string      `json:"rollouts,omitempty"`
	Items    []Item      `json:"items,omitempty"`
	Spec     verify.Spec `json:"spec"`
	// Workers scores this many items at once; default Activities.Workers.
	Workers int `json:"workers,omitempty"`
	// ItemTimeout bounds one item; default 60s. An item over it gets Error "timeout".
	ItemTimeout config.Duration `json:"item_timeout,omitempty"`
}

// ItemVerdict is the verdict of one item, in input order. Error is set when the item could not
// be judged (bad reference, timeout, sandbox failure): Score is then 0 and the item is left out
// of the means.
type ItemVerdict struct {
	ID string `json:"id"`
	verify.Verdict
	Error string `json:"error,omitempty"`
}

// VerifierMetric is the mean score of one component of the spec over the judged items.
type VerifierMetric struct {
	Name      string  `json:"name"`
	MeanScore float64 `json:"mean_score"`
}

// Metrics summarise a Score call. Slices, not maps, so that workflows read them in a fixed
// order.
type Metrics struct {
	Items     int              `json:"items"`
	Judged    int              `json:"judged"`
	Errors    int              `json:"errors"`
	TimedOut  int              `json:"timed_out"`
	MeanScore float64          `json:"mean_score"`
	PassRate  float64          `json:"pass_rate"`
	Verifiers []VerifierMetric `json:"verifiers"`
	// SandboxMode is the isolation of code verifiers on this worker ("" without a sandbox).
	SandboxMode string `json:"sandbox_mode,omitempty"`
}

// ScoreOutput holds one verdict per item and the metrics.
type ScoreOutput struct {
	Verdicts []ItemVerdict `json:"verdicts"`
	Metrics  Metrics       `json:"metrics"`
}

// Progress is the heartbeat detail of Score: items judged so far.
type Progress struct {
	Step  int `json:"step"`
	Total int `json:"total"`
}
