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
func (Activities) Tick(ctx context.Context, in demoapi.TickInput) (demoapi.TickOutput, error) {
	if in.Steps <= 0 {
		return demoapi.TickOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("demo: tick %s/%s: steps must be > 0, got %d", in.RunID, in.Phase, in.Steps), "InvalidInput", nil)
	}
	info := activity.GetInfo(ctx)
	start := 0
	if activity.HasHeartbeatDetails(ctx) {
		var p demoapi.Progress
		if err := activity.GetHeartbeatDetails(ctx, &p); err == nil {
			start = p.Step
		}
	}
	for step := start; step < in.Steps; step++ {
		select {
		case <-ctx.Done():
			return demoapi.TickOutput{}, fmt.Errorf("demo: tick %s/%s at step %d: %w", in.RunID, in.Phase, step, ctx.Err())
		case <-time.After(in.StepDuration):
		}
		if in.FailAtStep > 0 && step+1 == in.FailAtStep && info.Attempt == 1 {
			return demoapi.TickOutput{}, fmt.Errorf("demo: tick %s/%s: injected failure at step %d", in.RunID, in.Phase, step+1)
		}
		activity.RecordHeartbeat(ctx, demoapi.Progress{Step: step + 1, Total: in.Steps})
	}
	return demoapi.TickOutput{
		Checkpoint:  fmt.Sprintf("%s/runs/%s/%s/step-%06d/", strings.TrimSuffix(in.Store, "/"), in.RunID, in.Phase, in.Steps),
		From:        in.From,
		Steps:       in.Steps,
		ResumedFrom: start,
		Attempts:    info.Attempt,
	}, nil
}

// Ping answers a health check on a role's queue with the role name.
func (Activities) Ping(ctx context.Context, role string) (string, error) { return role, nil }
