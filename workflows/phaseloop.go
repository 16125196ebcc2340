package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train/trainapi"
)

// retainAndMemo marks the best checkpoint, prunes older ones beyond keepLast and shows memo in the UI;
// every chunked training phase ends each chunk with it.
func retainAndMemo(ctx, shortCtx workflow.Context, in PhaseInput, keepLast int, best string, memo map[string]any) error {
	if err := workflow.ExecuteActivity(shortCtx, trainapi.RetainName, trainapi.RetainInput{
		Store: in.Store, Run: in.RunID, Phase: in.Phase, KeepLast: keepLast, Best: best,
	}).Get(ctx, nil); err != nil {
		return fmt.Errorf("%s %s: retain: %w", in.Kind, in.Phase, err)
	}
	return workflow.UpsertMemo(ctx, memo)
}

// trainerContexts returns the trainer-queue contexts of a training phase: long for chunks and
// evaluations (heartbeating; a worker silent for heartbeat is presumed dead and its work retried
// elsewhere), short for Init/Retain-style calls that never heartbeat, with a start-to-close short
// enough that a worker killed inside one is noticed in minutes. Invalid input is never retried.
func trainerContexts(ctx workflow.Context, heartbeat time.Duration) (long, short workflow.Context) {
	return queueContexts(ctx, QueueTrainer, heartbeat)
}

// queueContexts are trainerContexts for the activities of any role's queue.
func queueContexts(ctx workflow.Context, queue string, heartbeat time.Duration) (long, short workflow.Context) {
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
		NonRetryableErrorTypes: []string{"InvalidInput"}}
	long = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: queue, StartToCloseTimeout: 6 * time.Hour, HeartbeatTimeout: heartbeat, RetryPolicy: retry,
	})
	short = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: queue, StartToCloseTimeout: 3 * time.Minute, RetryPolicy: retry,
	})
	return long, short
}
