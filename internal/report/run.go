package report

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/demo/demoapi"
	"github.com/temperml/temper/workflows"
)

// Snapshot is what the server says about a running pipeline right now.
type Snapshot struct {
	Progress workflows.PipelineProgress
	Step     demoapi.Progress // of the current phase's running activity, if any
	Activity string
	Attempt  int32
	// ChildStart is when the current phase's workflow run started (the latest run after a
	// continue-as-new).
	ChildStart time.Time
}

// Observe queries the pipeline and describes the current phase's child workflow for heartbeats.
func Observe(ctx context.Context, c client.Client, id string) (Snapshot, error) {
	var s Snapshot
	v, err := c.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	if err != nil {
		return s, err
	}
	if err := v.Get(&s.Progress); err != nil {
		return s, err
	}
	if s.Progress.ChildID == "" {
		return s, nil
	}
	desc, err := c.DescribeWorkflowExecution(ctx, s.Progress.ChildID, "")
	if err != nil {
		return s, nil
	}
	if st := desc.GetWorkflowExecutionInfo().GetStartTime(); st != nil {
		s.ChildStart = st.AsTime()
	}
	for _, pa := range desc.PendingActivities {
		s.Activity = pa.ActivityType.GetName()
		s.Attempt = pa.Attempt
		if pa.HeartbeatDetails != nil && len(pa.HeartbeatDetails.Payloads) > 0 {
			_ = json.Unmarshal(pa.HeartbeatDetails.Payloads[0].Data, &s.Step)
		}
	}
	return s, nil
}

// RunInput reads a run's pipeline input from the first event of its current history.
func RunInput(ctx context.Context, c client.Client, id string) (workflows.PipelineInput, bool) {
	var in workflows.PipelineInput
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, false
	}
	ev, err := it.Next()
	if err != nil {
		return in, false
	}
	payloads := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(payloads) == 0 || json.Unmarshal(payloads[0].GetData(), &in) != nil {
		return in, false
	}
	return in, true
}

// StatusName is a workflow status as people say it: running, completed, failed…
func StatusName(s enumspb.WorkflowExecutionStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// phaseMemo renders the running phase workflow's memo (its latest step, loss, reward, held-out exact
// match: what each phase kind upserts) as sorted key=value pairs, or "" when there is none.
func phaseMemo(ctx context.Context, c client.Client, childID string) string {
	if childID == "" {
		return ""
	}
	desc, err := c.DescribeWorkflowExecution(ctx, childID, "")
	if err != nil {
		return ""
	}
	fields := desc.WorkflowExecutionInfo.GetMemo().GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		var v any
		if json.Unmarshal(fields[k].GetData(), &v) != nil {
			continue
		}
		if f, ok := v.(float64); ok {
			parts = append(parts, fmt.Sprintf("%s=%.4g", k, f))
		} else if v == "" { // a cleared value (paused, waiting)
			continue
		} else {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}
