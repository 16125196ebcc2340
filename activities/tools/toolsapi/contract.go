// Package toolsapi is the tools role's side of the contract with workflows and with the roles that
// call long-running tools: the activity name (tools.Run), the workflow that runs one call
// (ToolCall) and their input and output structs. It imports no GoMLX, no storage client and no tool
// implementation, so workflows import it; the JSON field names are part of the contract (histories
// of runs in flight hold them) and must not change.
package toolsapi

import (
	"encoding/json"
	"time"
)

// RunName is the activity's registered name (queue "tools").
const RunName = "tools.Run"

// CallWorkflowName is the workflow that runs one call of a long-running tool (queue "temper"): a
// rollout or evaluation activity starts it under an ID that names the call, and waits for its
// result; a retried episode finds the finished call again under that ID.
const CallWorkflowName = "ToolCall"

// RunInput is one call: a tool and its arguments (already checked against the tool's schema by the
// caller; the tools worker checks them again).
type RunInput struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
}

// RunOutput is the call's result, as the policy reads it: Output, or Error with its Kind (a program
// that fails is a result, not a failed activity). Attempt is the activity attempt that produced it.
// It is the ToolCall workflow's result too: when every attempt failed (workers killed, timeouts),
// Error says so with Kind "failed", so that the episode goes on.
type RunOutput struct {
	Output  string `json:"output,omitempty"`
	Error   string `json:"error,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Attempt int32  `json:"attempt"`
}

// CallInput asks the ToolCall workflow for one call.
type CallInput struct {
	RunInput
	// Timeout bounds one attempt of the tools.Run activity (start to close); 0: DefaultTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Heartbeat is the activity's heartbeat timeout: how long a killed tools worker holds the call
	// up before it is retried elsewhere; 0: DefaultHeartbeat.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
	// Attempts bounds the activity's attempts; 0: DefaultAttempts.
	Attempts int32 `json:"attempts,omitempty"`
}

// Defaults of CallInput.
const (
	DefaultTimeout   = time.Minute
	DefaultHeartbeat = 5 * time.Second
	DefaultAttempts  = 4
)
