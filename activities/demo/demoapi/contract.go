// Package demoapi is the demo activities' side of the contract with workflows: the activity
// names and the Tick input and output. Workflows import it instead of package demo, as they do
// every role's contract; the JSON field names must not change.
package demoapi

import "time"

// Activity names, registered explicitly by workers.
const (
	TickName = "demo.Tick"
)

// PingName returns the name of the health-check activity of a worker role ("trainer.Ping").
func PingName(role string) string { return role + ".Ping" }

// TickInput asks for Steps steps of StepDuration each, for one phase of one run.
type TickInput struct {
	RunID        string        `json:"run_id"`
	Phase        string        `json:"phase"`
	Store        string        `json:"store"`
	From         string        `json:"from,omitempty"`
	Steps        int           `json:"steps"`
	StepDuration time.Duration `json:"step_duration"`
	// FailAtStep makes the attempt that reaches this step fail once (tests of retries); 0 = never.
	FailAtStep int `json:"fail_at_step,omitempty"`
}

// TickOutput reports what was done. ResumedFrom > 0 means an earlier attempt's heartbeat was used.
type TickOutput struct {
	Checkpoint  string `json:"checkpoint"`
	From        string `json:"from,omitempty"`
	Steps       int    `json:"steps"`
	ResumedFrom int    `json:"resumed_from"`
	Attempts    int32  `json:"attempts"`
}

// Progress is the heartbeat detail of every Temper activity that runs steps; `temper run --wait`
// reads it from the server to draw its progress bar.
type Progress struct {
	Step  int `json:"step"`
	Total int `json:"total"`
}
