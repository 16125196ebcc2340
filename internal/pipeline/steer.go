package pipeline

import (
	"context"
	"errors"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/workflows"
)

// Steer sends the steering Update name (workflows.UpdateSet, …) to run id and waits for its reply;
// the validator's refusal (or the phase's, behind a pipeline) comes back as a usage error with the
// innermost message.
func Steer(ctx context.Context, cl client.Client, id, name string, req workflows.SteerRequest) (workflows.SteerReply, error) {
	var reply workflows.SteerReply
	h, err := cl.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, &reply)
	}
	if err != nil {
		return reply, usage.Errorf("%s %s: %s", name, id, refusal(err))
	}
	return reply, nil
}

// refusal is the innermost application error's message: what the validator said (behind a
// pipeline: the phase's refusal, named by the forwarding), without the SDK's annotations.
func refusal(err error) string {
	msg := err.Error()
	for e := err; e != nil; e = errors.Unwrap(e) {
		var app *temporal.ApplicationError
		if errors.As(e, &app) {
			msg = app.Message()
			e = app
		}
	}
	return msg
}
