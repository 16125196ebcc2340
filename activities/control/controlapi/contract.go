// Package controlapi is the control activity's side of the contract with workflows: its name and
// input. A workflow that applies a change someone made to a running run (temper set, pause, resume,
// a gate's decision, a fork) asks this activity to write it to the phase's metrics log, so that the
// log, the report and the history tell the same story; the workflow itself does no I/O.
package controlapi

// LogName is the activity that appends control records to metrics logs (trainer queue).
const LogName = "control.Log"

// Record is one control record: ckpt.MetricsRecord of kind "control" in the log of Run/Phase.
type Record struct {
	Run   string `json:"run"`
	Phase string `json:"phase"` // the phase's directory: a back-tracking branch has its own (grpo.b1)
	// Step is the boundary the change applied at: after Step iterations or optimizer steps.
	Step int `json:"step"`
	// Seq numbers the phase's control events; a retried write replaces the same records.
	Seq   int     `json:"seq"`
	Time  float64 `json:"time"` // workflow time of the event, Unix seconds
	Event string  `json:"event"`
	Label string  `json:"label"`
	Note  string  `json:"note,omitempty"`
	// Values are the new values of the numeric fields a change set ("optimizer.lr": 1e-4).
	Values map[string]float64 `json:"values,omitempty"`
}

// LogInput asks for records to be appended to the logs under Store.
type LogInput struct {
	Store   string   `json:"store"`
	Records []Record `json:"records"`
}
