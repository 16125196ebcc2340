package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/demo/demoapi"
)

// Activities carries the placeholder activities; it has no dependencies.
type Activities struct{}

// Tick sleeps Steps × StepDuration, heartbeating Progress after each step. A retried attempt continues
// from the last heartbeat, so a killed worker costs at most one step.
func (Activities) Tick(ctx context.Context, in TickInput) (TickOutput, error) {
	if in.Steps <= 0 {
		return TickOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("demo: tick %s/%s: steps must be > 0, got %d", in.RunID, in.Phase, in.Steps), "InvalidInput", nil)
	}
	info := activity.GetInfo(ctx)
	start := 0
	if activity.HasHeartbeatDetails(ctx) {
		var p Progress
		if err := activity.GetHeartbeatDetails(ctx, &p); err == nil {
			start = p.Step
		}
	}
	for step := start; step < in.Steps; step++ {
		select {
		case <-ctx.Done():
			return TickOutput{}, fmt.Errorf("demo: tick %s/%s at step %d: %w", in.RunID, in.Phase, step, ctx.Err())
		case <-time.After(in.StepDuration):
		}
		if in.FailAtStep > 0 && step+1 == in.FailAtStep && info.Attempt == 1 {
			return TickOutput{}, fmt.Errorf("demo: tick %s/%s: injected failure at step %d", in.RunID, in.Phase, step+1)
		}
		activity.RecordHeartbeat(ctx, Progress{Step: step + 1, Total: in.Steps})
	}
	return TickOutput{
		Checkpoint:  fmt.Sprintf("%s/runs/%s/%s/step-%06d/", strings.TrimSuffix(in.Store, "/"), in.RunID, in.Phase, in.Steps),
		From:        in.From,
		Steps:       in.Steps,
		ResumedFrom: start,
		Attempts:    info.Attempt,
	}, nil
}

// Ping answers a health check on a role's queue with the role name.
func (Activities) Ping(ctx context.Context, role string) (string, error) { return role, nil }

// The names and I/O types live in contract (what workflows import); these aliases keep callers unchanged.
type (
	TickInput  = demoapi.TickInput
	TickOutput = demoapi.TickOutput
	Progress   = demoapi.Progress
)

// TickName is the Tick activity's name (see contract).
const TickName = demoapi.TickName

// PingName returns the name of the health-check activity of a worker role (see contract).
func PingName(role string) string { return demoapi.PingName(role) }
