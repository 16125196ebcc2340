package workflows_test

import (
	"errors"

	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"
)

type workflowListRequest struct{ query string }

func (r workflowListRequest) build() *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Query: r.query, PageSize: 100}
}

func asApp(err error, target **temporal.ApplicationError) bool { return errors.As(err, target) }
