package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/workflows"
)

// forwardControl is the local activity workflows.ForwardName: a pipeline's set, pause or resume
// sent on to the phase workflow that runs now, the newest back-tracking branch (RUN.PHASE.bN) when
// the phase has branched. A refusal by the phase is final (not retried); a phase caught between
// two runs (continue-as-new) is asked again.
func forwardControl(c client.Client) func(context.Context, workflows.ForwardInput) (workflows.SteerReply, error) {
	return func(ctx context.Context, in workflows.ForwardInput) (workflows.SteerReply, error) {
		var reply workflows.SteerReply
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			target := runningBranch(ctx, c, in.Workflow)
			var h client.WorkflowUpdateHandle
			h, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: target, UpdateName: in.Update,
				Args: []any{in.Request}, WaitForStage: client.WorkflowUpdateStageCompleted})
			if err == nil {
				err = h.Get(ctx, &reply)
			}
			var nf *serviceerror.NotFound
			if err == nil || !(errors.As(err, &nf) || strings.Contains(err.Error(), "workflow execution already completed")) {
				break
			}
			time.Sleep(time.Duration(200*(attempt+1)) * time.Millisecond)
		}
		if err != nil {
			msg := err.Error()
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				msg = app.Message() // the phase's own words, without the SDK's annotations
			}
			return reply, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s %s: %s", in.Update, in.Workflow, msg), "Refused", nil)
		}
		return reply, nil
	}
}

// runningBranch follows id's running back-tracking branches (id.bN, a pending child) to the newest.
func runningBranch(ctx context.Context, c client.Client, id string) string {
	for depth := 0; depth < 100; depth++ {
		desc, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return id
		}
		next := ""
		for _, ch := range desc.GetPendingChildren() {
			if strings.HasPrefix(ch.GetWorkflowId(), id+".b") {
				next = ch.GetWorkflowId()
			}
		}
		if next == "" {
			return id
		}
		id = next
	}
	return id
}
