// Package rewardapi is the reward role's side of the contract with workflows: the activity name
// (reward.Score), its input and output structs and the per-call item bound. It imports no GoMLX
// and no storage client, so workflows import it instead of package reward; the JSON field names
// are part of the contract (histories of runs in flight hold them) and must not change.
package rewardapi

import (
	"encoding/json"
	"strings"

	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
)

// ScoreName is the activity that scores rollouts, registered on the "reward" queue.
const ScoreName = "reward.Score"

// MaxItems bounds one ScoreInput whose items or verdicts travel inline in the Temporal payload, which
// must stay far below 2 MB (callers must also keep completions short). A rollouts object scored with
// WriteVerdicts has no bound: its verdicts go to the store.
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
	// WriteVerdicts writes the verdicts as a store object beside Rollouts (VerdictsURI) and returns
	// counts and means only, so that nothing per sample travels in workflow history (byref.go).
	WriteVerdicts bool `json:"write_verdicts,omitempty"`
	// MaxFailed, with WriteVerdicts, returns up to this many failed items (index and feedback) for
	// self-correction; 0 returns none.
	MaxFailed int `json:"max_failed,omitempty"`
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
	Passed    int              `json:"passed,omitempty"` // judged items that passed
	Verifiers []VerifierMetric `json:"verifiers"`
	// SandboxMode is the isolation of code verifiers on this worker ("" without a sandbox).
	SandboxMode string `json:"sandbox_mode,omitempty"`
}

// ScoreOutput holds one verdict per item and the metrics.
type ScoreOutput struct {
	Verdicts []ItemVerdict `json:"verdicts"`
	Metrics  Metrics       `json:"metrics"`
	// VerdictsURI names the verdicts object when the input set WriteVerdicts (Verdicts is then empty).
	VerdictsURI string `json:"verdicts_uri,omitempty"`
	// Failed lists the first failed, judged items (file order), at most MaxFailed of them.
	Failed []Failed `json:"failed,omitempty"`
}

// Failed is one item that was judged and did not pass, by its index in the rollouts object.
type Failed struct {
	Index    int    `json:"index"`
	Feedback string `json:"feedback,omitempty"`
}

// VerdictsURI is where the verdicts of a rollouts object live: beside it, ".verdicts.jsonl" for
// ".jsonl". Workflows derive it too (a pure string function), so it is the one naming rule.
func VerdictsURI(rollouts string) string {
	return strings.TrimSuffix(rollouts, ".jsonl") + ".verdicts.jsonl"
}

// Progress is the heartbeat detail of Score: items judged so far.
type Progress struct {
	Step  int `json:"step"`
	Total int `json:"total"`
}
