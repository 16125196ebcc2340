package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/tools/toolsapi"
	"github.com/temperml/temper/workflows"
)

// toolCallTimeout bounds a ToolCall workflow: well past the episode's own timeout for a call
// (tools.PythonTimeout) and its activity's attempts.
const toolCallTimeout = 10 * time.Minute

// ToolDispatcher runs long-running tools' calls as ToolCall workflows (activities/tools/toolclient.Dispatcher):
// on Client, or, when nil, on the client of the activity whose episode makes the call.
type ToolDispatcher struct {
	Client client.Client
}

// Call starts the ToolCall workflow id, or finds the one already running or finished under that ID
// (a retried episode replays its calls), and waits for its result.
func (d ToolDispatcher) Call(ctx context.Context, id string, in toolsapi.CallInput) (toolsapi.RunOutput, error) {
	c := d.Client
	if c == nil {
		c = activity.GetClient(ctx)
	}
	opts := client.StartWorkflowOptions{ID: id, TaskQueue: workflows.QueueTemper,
		// A running call is joined; a finished one is not run again (its result is read below).
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowExecutionErrorWhenAlreadyStarted: false,
		// A call nobody waits for any more (its episode timed out: no tools worker is up) ends by
		// itself instead of waiting for one forever.
		WorkflowExecutionTimeout: toolCallTimeout,
	}
	var run client.WorkflowRun
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.ToolCallName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		run, err = c.GetWorkflow(ctx, id, ""), nil
	}
	if err != nil {
		return toolsapi.RunOutput{}, fmt.Errorf("workers: tool call %s: start: %w", id, err)
	}
	var out toolsapi.RunOutput
	if err := run.Get(ctx, &out); err != nil {
		return toolsapi.RunOutput{}, fmt.Errorf("workers: tool call %s: %w", id, err)
	}
	return out, nil
}
