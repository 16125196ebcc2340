package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/tools/toolsapi"
)

// QueueTools runs tools.Run: the calls of long-running tools (python), one activity each.
const QueueTools = "tools"

// ToolCallName is the registered name of ToolCall.
const ToolCallName = toolsapi.CallWorkflowName

// ToolCall runs one call of a long-running tool as the tools.Run activity on the tools queue, so
// that the call is retried on another tools worker when its worker dies (its heartbeat stops) and
// shows in the Web UI with its arguments and result. Episodes start it from their rollout or
// evaluation activity under an ID naming the call (activities/tools/toolclient.CallID), so that a retried
// activity finds the finished call instead of running it again. When every attempt fails, the
// result says so (Error, Kind "failed") instead of failing the workflow: the episode goes on with
// that error as the tool message.
func ToolCall(ctx workflow.Context, in toolsapi.CallInput) (toolsapi.RunOutput, error) {
	timeout, heartbeat, attempts := in.Timeout, in.Heartbeat, in.Attempts
	if timeout <= 0 {
		timeout = toolsapi.DefaultTimeout
	}
	if heartbeat <= 0 {
		heartbeat = toolsapi.DefaultHeartbeat
	}
	if attempts <= 0 {
		attempts = toolsapi.DefaultAttempts
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: QueueTools, StartToCloseTimeout: timeout,
		HeartbeatTimeout: heartbeat, RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Second, MaximumAttempts: attempts}})
	var out toolsapi.RunOutput
	if err := workflow.ExecuteActivity(actx, toolsapi.RunName, in.RunInput).Get(ctx, &out); err != nil {
		return toolsapi.RunOutput{Error: in.Tool + ": every attempt failed: " + err.Error(), Kind: "failed", Attempt: attempts}, nil
	}
	return out, nil
}
